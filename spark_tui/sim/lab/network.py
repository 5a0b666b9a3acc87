"""The lab's network: a private bridge in the root namespace and one namespace per node,
joined by a veth pair whose inner end carries a ConnectX-like name. Nothing else is touched:
no iptables, no sysctl, no interface the lab did not create."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

from spark_tui.core.errors import SparkError
from spark_tui.sim.lab.config import LabConfig, NodeLayout, RingCable
from spark_tui.sim.lab.run import run

NETNS_DIR = Path("/run/netns")


def _links() -> list[dict[str, object]]:
    out = run(["ip", "-j", "link", "show"]).stdout
    data = json.loads(out or "[]")
    return data if isinstance(data, list) else []


def link_exists(name: str) -> bool:
    return any(link.get("ifname") == name for link in _links())


def lab_links(prefix: str) -> list[str]:
    """The root-namespace links this lab prefix names: its bridge and the veths' host ends."""
    pattern = re.compile(rf"^{re.escape(prefix)}(0|v\d+|p\d+|a\d+|b\d+|r0|q0)$")
    return [str(link["ifname"]) for link in _links() if pattern.match(str(link.get("ifname")))]


def lab_namespaces(prefix: str) -> list[str]:
    """The named network namespaces this lab prefix names (`<prefix>-n1`..., `<prefix>-reg`)."""
    pattern = re.compile(rf"^{re.escape(prefix)}-(n\d+|reg)$")
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir() if pattern.match(p.name))
    except OSError:
        return []


def check_subnet_free(cfg: LabConfig) -> None:
    """Refuse a subnet the host already routes through an interface that is not the lab's."""
    out = run(["ip", "-j", "-4", "route", "show"]).stdout
    routes = json.loads(out or "[]")
    net = cfg.network
    for route in routes if isinstance(routes, list) else []:
        dst = route.get("dst")
        dev = route.get("dev")
        if not dst or dst == "default" or dev == cfg.bridge:
            continue
        try:
            other = ipaddress.IPv4Network(dst, strict=False)
        except ValueError:
            continue
        if other.overlaps(net):
            raise SparkError(
                f"the lab's subnet {net} overlaps {other} on {dev}",
                "the lab only uses its own subnet; free it or pick another lab prefix and subnet",
            )


def create_bridge(cfg: LabConfig) -> None:
    run(["ip", "link", "add", cfg.bridge, "type", "bridge"])
    run(["ip", "addr", "add", f"{cfg.bridge_address}/{cfg.prefixlen}", "dev", cfg.bridge])
    run(["ip", "link", "set", cfg.bridge, "up"])


def create_node_network(cfg: LabConfig, node: NodeLayout) -> None:
    """A namespace with `lo` up and the node's ConnectX-named end of a veth on the bridge."""
    run(["ip", "netns", "add", node.netns])
    run(["ip", "link", "add", node.veth_host, "type", "veth", "peer", "name", node.veth_peer])
    run(["ip", "link", "set", node.veth_peer, "netns", node.netns])
    run(["ip", "link", "set", node.veth_host, "master", cfg.bridge])
    run(["ip", "link", "set", node.veth_host, "up"])
    inside = ["ip", "-n", node.netns]
    run([*inside, "link", "set", node.veth_peer, "name", node.ifname])
    run([*inside, "addr", "add", f"{node.address}/{cfg.prefixlen}", "dev", node.ifname])
    run([*inside, "link", "set", node.ifname, "up"])
    run([*inside, "link", "set", "lo", "up"])


# The ConnectX-like names of a ring cable's ends: port f0 toward the next node, f1 toward
# the previous (the ibdev2netdev shim lists them as rocep1s0f0 and rocep1s0f1).
RING_PORT_TO_NEXT = "enp1s0f0np0"
RING_PORT_TO_PREVIOUS = "enp1s0f1np1"


def create_ring_cable(cable: RingCable) -> None:
    """One cable of a ring lab: a veth pair between two nodes' namespaces, its own subnet."""
    run(["ip", "link", "add", cable.a_end, "type", "veth", "peer", "name", cable.b_end])
    for end, node, port, address in (
        (cable.a_end, cable.a, RING_PORT_TO_NEXT, cable.a_address),
        (cable.b_end, cable.b, RING_PORT_TO_PREVIOUS, cable.b_address),
    ):
        run(["ip", "link", "set", end, "netns", node.netns])
        inside = ["ip", "-n", node.netns]
        run([*inside, "link", "set", end, "name", port])
        run([*inside, "addr", "add", address, "dev", port])
        run([*inside, "link", "set", port, "up"])


# Run in the cable's first namespace: a TCP connection to a closed port of the other end
# is refused only if the packets cross the cable (and leaves each end's neighbour entry).
_CABLE_PROBE = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], 9), timeout=3).close()\n"
    "except ConnectionRefusedError:\n"
    "    pass\n"
)


def check_ring_cable(cable: RingCable, python: str) -> None:
    """Pass traffic over a cable once: it works, and each end has seen the other."""
    peer = cable.b_address.split("/")[0]
    # Only the network namespace, as for the bridge check: the interpreter stays visible.
    cmd = ["nsenter", f"--net={NETNS_DIR / cable.a.netns}", python, "-S", "-c", _CABLE_PROBE, peer]
    if run(cmd, check=False).returncode != 0:
        raise SparkError(
            f"ring cable {cable.index} ({cable.a.name} to {cable.b.name}) passes no traffic",
            "run `spark-tui lab down`, then `lab up --ring` again",
        )


def create_registry_network(cfg: LabConfig) -> None:
    """The registry's own namespace on the bridge, at the subnet's second address."""
    host_end, inner = cfg.registry_veths
    run(["ip", "netns", "add", cfg.registry_netns])
    run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", inner])
    run(["ip", "link", "set", inner, "netns", cfg.registry_netns])
    run(["ip", "link", "set", host_end, "master", cfg.bridge])
    run(["ip", "link", "set", host_end, "up"])
    inside = ["ip", "-n", cfg.registry_netns]
    run([*inside, "addr", "add", f"{cfg.registry_address}/{cfg.prefixlen}", "dev", inner])
    run([*inside, "link", "set", inner, "up"])
    run([*inside, "link", "set", "lo", "up"])


def own_namespaces(cfg: LabConfig) -> list[str]:
    """The named network namespaces of exactly this lab's nodes (and its registry) that exist."""
    wanted = {n.netns for n in cfg.all_nodes()} | {cfg.registry_netns}
    return [ns for ns in lab_namespaces(cfg.prefix) if ns in wanted]


def own_links(cfg: LabConfig) -> list[str]:
    """The root-namespace links of exactly this lab (its bridge, its nodes' veths) that exist.
    By name, not by pattern: lab `ab`'s pattern would also match lab `abv`'s bridge `abv0`."""
    wanted = {cfg.bridge, *cfg.registry_veths}
    wanted |= {name for n in cfg.all_nodes() for name in (n.veth_host, n.veth_peer)}
    wanted |= {name for c in cfg.ring_cables() for name in (c.a_end, c.b_end)}
    return [str(link["ifname"]) for link in _links() if str(link.get("ifname")) in wanted]


def delete_network(cfg: LabConfig) -> list[str]:
    """Delete the lab's namespaces, veths and bridge; return what could not be deleted."""
    left = []
    for ns in own_namespaces(cfg):
        if run(["ip", "netns", "del", ns], check=False).returncode != 0:
            left.append(f"namespace {ns}")
    # Deleting a namespace deletes the veth end inside it and with it the pair; remove
    # whatever host ends and the bridge remain.
    for link in own_links(cfg):
        if run(["ip", "link", "del", link], check=False).returncode != 0 and link_exists(link):
            left.append(f"link {link}")
    return left

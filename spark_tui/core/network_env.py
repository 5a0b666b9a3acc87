"""Per-node NCCL, Gloo, UCX and MPI socket settings, from that node's own facts.

A worker's ConnectX names may differ from the head's (`enp1s0f1np1` on one Spark,
`enP2p1s0f1np1` on the other), so these values are never copied between nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_tui.core.errors import FactsError
from spark_tui.core.facts import Interface, NodeFacts
from spark_tui.core.wiring import Port, Wiring

# The variable that names the node's RoCE HCAs (the playbook's IB_IF).
IB_IF_VAR = "NCCL_IB_HCA"
# Fixed values the playbook passes on every node.
FIXED_NETWORK_ENV = {"NCCL_IB_DISABLE": "0", "NCCL_IGNORE_CPU_AFFINITY": "1"}


def eth_interface(node: NodeFacts) -> Interface:
    """The node's first up ConnectX interface that carries an IPv4 (its socket interface)."""
    for iface in node.connectx_up:
        if iface.ipv4:
            return iface
    up = node.connectx_up
    if up:
        names = ", ".join(i.netdev for i in up)
        raise FactsError(
            f"{node.name}: ConnectX interface(s) {names} are up but have no IPv4 address",
            f"give the cluster link an address on {node.name} (Connect Multiple Sparks "
            "playbook, Configure Manually), then probe again",
        )
    raise FactsError(
        f"{node.name}: no ConnectX interface is up",
        f"check the QSFP cable on {node.name} and run `ibdev2netdev` there: one port "
        "must show (Up); then probe again",
    )


def rdma_devices(node: NodeFacts) -> list[str]:
    """Every up ConnectX RDMA device of the node, in probe order, without repeats."""
    seen: list[str] = []
    for iface in node.connectx_up:
        if iface.rdma_device and iface.rdma_device not in seen:
            seen.append(iface.rdma_device)
    return seen


def network_env(node: NodeFacts, toward: Port | None = None) -> dict[str, str]:
    """The network variables of the playbook's `docker run -e ...`, for this node; with
    `toward` (its end of the one cable to the other node) over that port, leaving out the
    HCAs of ports cabled elsewhere (NCCL would try the first HCA listed, reachable or not)."""
    if toward is None:
        eth = eth_interface(node).netdev
        hcas = rdma_devices(node)
    else:
        eth = toward.netdevs[0]
        hcas = [
            i.rdma_device
            for i in node.connectx_up
            if i.rdma_device and (i.netdev in toward.netdevs or not i.ipv4)
        ]
    # The playbook's order, so a printed plan reads like its `docker run`.
    return {
        "MN_IF_NAME": eth,
        "UCX_NET_DEVICES": eth,
        "NCCL_SOCKET_IFNAME": eth,
        IB_IF_VAR: ",".join(dict.fromkeys(hcas)),
        **FIXED_NETWORK_ENV,
        "OMPI_MCA_btl_tcp_if_include": eth,
        "GLOO_SOCKET_IFNAME": eth,
        "TP_SOCKET_IFNAME": eth,
    }


# On cabling with a subnet per cable, NCCL must pick for each peer the port on that peer's
# subnet. Field reports agree on NCCL_IB_SUBNET_AWARE_ROUTING=1 (sparkrun's ring settings in
# spark-arena/sparkrun#157; the 4-Spark switchless ring of
# tonyd2wild/GLM-5.3-Int4-Int8Mix-TP4-4x-DGX-Spark#2; defilantech/LLMKube#1816's 3-Spark
# ring). They disagree on NCCL_IB_MERGE_NICS: sparkrun sets 0, the 4-Spark ring report says
# it must stay 1 (NCCL's default) because the listener advertises the merged device's GIDs;
# the `ring_merge_nics` setting chooses (default: NCCL's own 1).
RING_FIXED_ENV = {"NCCL_IB_SUBNET_AWARE_ROUTING": "1"}


def linked_env(
    node: NodeFacts,
    wiring: Wiring,
    peers: Sequence[str],
    *,
    bootstrap_interface: str | None = None,
    merge_nics: bool = True,
) -> dict[str, str]:
    """The network variables of a rank on cabling with a subnet per cable (a ring): NCCL's
    and UCX's data go over the node's ports toward `peers` (the job's other nodes); the
    bootstrap (Gloo, NCCL's and torch's sockets) over `bootstrap_interface` when given
    (the LAN every node reaches), else over the first of those ports."""
    ports = wiring.ports_of(node.name, peers)
    netdevs = [d for p in ports for d in p.netdevs]
    rdma = list(dict.fromkeys(r for p in ports for r in p.rdma_devices))
    if not netdevs:
        raise FactsError(
            f"{node.name}: no ConnectX port is linked to {', '.join(peers)}",
            f"cable {node.name} to its neighbours and give each cable a subnet, then probe again",
        )
    control = bootstrap_interface or netdevs[0]
    env = {
        "MN_IF_NAME": control,
        "UCX_NET_DEVICES": ",".join(netdevs),
        "NCCL_SOCKET_IFNAME": control if bootstrap_interface else ",".join(netdevs),
        IB_IF_VAR: ",".join(rdma),
        **FIXED_NETWORK_ENV,
        "OMPI_MCA_btl_tcp_if_include": control,
        "GLOO_SOCKET_IFNAME": control,
        "TP_SOCKET_IFNAME": control,
        **RING_FIXED_ENV,
        "NCCL_IB_MERGE_NICS": "1" if merge_nics else "0",
    }
    if any(not wiring.linked(a, b) for a in (node.name, *peers) for b in peers):
        # NCCL builds a tree besides its rings, and a tree edge between nodes with no cable
        # never connects (the RoCE queue pair does not follow IP routes): rings only
        # (MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks#3, a 4-Spark ring).
        env["NCCL_ALGO"] = "Ring"
    return env

"""Finding the nodes: an inventory file, `--hosts`, `~/.ssh/config`, or a Spark's ConnectX peers.

Peers found on a Spark's cluster link are candidates only: they are offered for the
user's confirmation, never connected to or trusted on their own.
"""

from __future__ import annotations

import asyncio
import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_tui.core.inventory import InventoryNode
from spark_tui.remote import parsers
from spark_tui.remote import probe_commands as pc
from spark_tui.remote.ssh import NodeConnection


def _config_aliases(path: Path, seen: set[Path], names: list[str]) -> None:
    """Collect `Host` aliases of a config file, following its Includes where they appear."""
    path = path.expanduser()
    if path in seen or not path.is_file():
        return
    seen.add(path)
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        words = line.replace("=", " ", 1).split()
        if len(words) < 2:
            continue
        keyword = words[0].lower()
        if keyword == "include":
            for pattern in words[1:]:
                full = os.path.expanduser(pattern)
                if not os.path.isabs(full):
                    full = str(Path("~/.ssh").expanduser() / full)
                for match in sorted(glob.glob(full)):
                    _config_aliases(Path(match), seen, names)
        elif keyword == "host":
            for alias in words[1:]:
                if not any(c in alias for c in "*?!") and alias not in names:
                    names.append(alias)


def hosts_from_ssh_config(path: str = "~/.ssh/config") -> list[InventoryNode]:
    """Every `Host` alias without wildcards or negation in ~/.ssh/config (and its Includes).

    The alias is kept as the host: connecting resolves HostName, User, Port and keys
    from the same config.
    """
    names: list[str] = []
    _config_aliases(Path(path), set(), names)
    return [InventoryNode(name=n, host=n) for n in names]


@dataclass
class PeerCandidate:
    """A neighbour seen on an up ConnectX link of a Spark: maybe another Spark."""

    address: str
    netdev: str  # the local ConnectX netdev it was seen on
    mac: str | None
    state: str
    via: str  # the node it was found from

    def to_node(self, name: str | None = None, **kwargs: Any) -> InventoryNode:
        return InventoryNode(name=name or self.address, host=self.address, **kwargs)


def peers_from_outputs(via: str, ibdev: str, ip_addr: str, ip_neigh: str) -> list[PeerCandidate]:
    """ConnectX peers from the output of ibdev2netdev, `ip -j addr` and `ip -j neigh`."""
    ports = parsers.parse_ibdev2netdev(ibdev)
    links = parsers.parse_ip_addr(ip_addr) if ip_addr.strip() else {}
    up = {p.netdev for p in ports if p.is_up}
    own = {a.split("/")[0] for link in links.values() for a in link.ipv4 + link.ipv6}
    found: list[PeerCandidate] = []
    seen: set[str] = set()
    for n in parsers.parse_ip_neigh(ip_neigh):
        if n.netdev not in up or not n.usable or n.address in own or n.address in seen:
            continue
        if n.address.startswith("fe80:"):
            continue  # link-local IPv6 needs a scope to be usable: the IPv4 neighbour is better
        seen.add(n.address)
        found.append(
            PeerCandidate(address=n.address, netdev=n.netdev, mac=n.mac, state=n.state, via=via)
        )
    return found


async def connectx_peers(conn: NodeConnection) -> list[PeerCandidate]:
    """Neighbours on the node's up ConnectX interfaces: candidates to confirm, not nodes."""
    ibdev, addr, neigh = await asyncio.gather(
        conn.run(pc.IBDEV2NETDEV), conn.run(pc.IP_ADDR_JSON), conn.run(pc.IP_NEIGH_JSON)
    )
    if not ibdev.ok:
        return []
    return peers_from_outputs(
        conn.name, ibdev.stdout, addr.stdout if addr.ok else "", neigh.stdout if neigh.ok else ""
    )

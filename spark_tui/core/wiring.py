"""How the Sparks are cabled, told from their probes: a direct pair, a switch, a ring, or
something incomplete.

Each up ConnectX port with an IPv4 sits on a subnet; two nodes whose ports share a subnet
are linked. A subnet shared by three or more nodes is a switch (or a bridge); a ring gives
every pair of neighbours its own subnet. Link-local (169.254/16) addresses share one subnet
on every cable, so there only the neighbours that answered on a port say who is behind it.
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from spark_tui.core.facts import Interface, NodeFacts

_LINK_LOCAL = ipaddress.IPv4Network("169.254.0.0/16")

SINGLE = "single"
PAIR = "pair"
SWITCH = "switch"
RING = "ring"
MESH = "mesh"  # a cable between every pair of nodes (a ring of three is one)
CHAIN = "chain"  # every node reachable, but not over a link per pair of neighbours
INCOMPLETE = "incomplete"  # some node has no link to the others
UNKNOWN = "unknown"  # no ConnectX address known on any node


@dataclass(frozen=True)
class Port:
    """One node's end of a link: its interfaces there (the GB10 shows each physical port as
    two netdevs, one per PCIe half, that may share the subnet), its address and speed."""

    node: str
    netdevs: tuple[str, ...]
    rdma_devices: tuple[str, ...]
    address: str
    speed_mbps: int | None


@dataclass(frozen=True)
class Link:
    """Nodes sharing one subnet: two on a cable, more behind a switch. `answered` is true
    when a neighbour entry shows a member reached another over it."""

    subnet: str
    ports: tuple[Port, ...]
    answered: bool

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(p.node for p in self.ports)

    @property
    def speed_mbps(self) -> int | None:
        """The slowest end's speed (None when any end's is unknown)."""
        speeds = [p.speed_mbps for p in self.ports]
        return None if any(s is None for s in speeds) else min(s for s in speeds if s)

    def port_of(self, node: str) -> Port | None:
        return next((p for p in self.ports if p.node == node), None)


@dataclass(frozen=True)
class Wiring:
    """The cabling of a list of nodes (head first): its kind, its links, and what is
    missing for the kind to be whole (`missing`: pairs of nodes with no link)."""

    kind: str
    nodes: tuple[str, ...]
    links: tuple[Link, ...] = ()
    missing: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def linked(self, a: str, b: str) -> bool:
        """Whether `a` and `b` share a subnet (the same node counts as linked)."""
        return a == b or self.link_between(a, b) is not None

    def link_between(self, a: str, b: str) -> Link | None:
        for link in self.links:
            if a in link.nodes and b in link.nodes:
                return link
        return None

    def ports_of(self, node: str, peers: Sequence[str] | None = None) -> list[Port]:
        """The node's ports toward `peers` (every linked node when None), link order."""
        out = []
        for link in self.links:
            port = link.port_of(node)
            others = [n for n in link.nodes if n != node]
            if port is None or (peers is not None and not any(o in peers for o in others)):
                continue
            if port not in out:
                out.append(port)
        return out

    def neighbours(self, node: str) -> list[str]:
        return [n for link in self.links if node in link.nodes for n in link.nodes if n != node]

    @property
    def summary(self) -> str:
        """One short line: the kind, its size and its slowest link."""
        n = len(self.nodes)
        speeds = [link.speed_mbps for link in self.links if link.speed_mbps]
        speed = f", {min(speeds) // 1000} Gb/s" if speeds else ""
        if self.kind == SINGLE:
            return "one node (no cluster link needed)"
        if self.kind == PAIR:
            return f"direct pair{speed}"
        if self.kind == SWITCH:
            return f"switch: {n} nodes on one subnet{speed}"
        if self.kind == MESH:
            return f"mesh of {n}: a link per pair of nodes{speed}"
        if self.kind == RING:
            return f"ring of {n}: a link and a subnet per pair of neighbours{speed}"
        gaps = ", ".join(f"{a}-{b}" for a, b in self.missing[:3])
        more = f" (+{len(self.missing) - 3})" if len(self.missing) > 3 else ""
        if self.kind == CHAIN:
            return f"chain of {n}: no link {gaps}{more}"
        if self.kind == INCOMPLETE:
            return f"incomplete: no link {gaps}{more}"
        return "unknown: no ConnectX address probed"

    @property
    def short(self) -> str:
        """A few words for a narrow panel: "ring of 4, 200G", "incomplete: no a-c"."""
        speeds = [link.speed_mbps for link in self.links if link.speed_mbps]
        speed = f", {min(speeds) // 1000}G" if speeds else ""
        n = len(self.nodes)
        if self.kind in (RING, MESH, SWITCH):
            return f"{self.kind} of {n}{speed}"
        if self.kind == PAIR:
            return f"direct pair{speed}"
        if self.kind in (CHAIN, INCOMPLETE):
            a, b = self.missing[0]
            more = f" +{len(self.missing) - 1}" if len(self.missing) > 1 else ""
            return f"{self.kind}: no link {a}-{b}{more}"
        return "wiring unknown" if self.kind == UNKNOWN else "one node"

    def describe(self) -> list[str]:
        """Who is linked to whom, over which interfaces, at what speed: a line per link."""
        lines = []
        for link in self.links:
            ends = "  ".join(f"{p.node} {'/'.join(p.netdevs)} {p.address}" for p in link.ports)
            speed = f"{link.speed_mbps // 1000} Gb/s" if link.speed_mbps else "speed ?"
            seen = "answers" if link.answered else "no reply seen yet"
            lines.append(f"{link.subnet}  {ends}  {speed}  {seen}")
        lines += list(self.notes)
        return lines


def _subnet(iface: Interface) -> ipaddress.IPv4Network | None:
    if not iface.ipv4 or iface.prefix_len is None:
        return None
    try:
        return ipaddress.IPv4Network(f"{iface.ipv4}/{iface.prefix_len}", strict=False)
    except ValueError:
        return None


def _ports(node: NodeFacts, subnet_of: dict[str, str]) -> dict[str, list[Interface]]:
    """The node's up ConnectX interfaces by the key of the segment they sit on."""
    out: dict[str, list[Interface]] = {}
    for iface in node.connectx_up:
        net = _subnet(iface)
        if net is None:
            continue
        key = str(net)
        if net.subnet_of(_LINK_LOCAL):
            # Every bare cable is on 169.254/16: the peers that answered name the segment
            # (with none seen yet, the ports stay on the one shared subnet).
            key = subnet_of.get(iface.ipv4 or "", key)
        out.setdefault(key, []).append(iface)
    return out


def _link_local_segments(nodes: Sequence[NodeFacts]) -> dict[str, str]:
    """For link-local addresses: one segment key per pair that answered each other."""
    owner = {
        i.ipv4: (n.name, i.netdev)
        for n in nodes
        for i in n.connectx_up
        if i.ipv4 and (net := _subnet(i)) is not None and net.subnet_of(_LINK_LOCAL)
    }
    keys: dict[str, str] = {}
    for n in nodes:
        for i in n.connectx_up:
            if i.ipv4 not in owner or i.ipv4 in keys:
                continue
            for peer in i.peers:
                if peer in owner and owner[peer][0] != n.name:
                    key = f"link-local {min(i.ipv4, peer)}~{max(i.ipv4, peer)}"
                    keys.setdefault(i.ipv4, key)
                    keys.setdefault(peer, key)
                    break
    return keys


def _port(node: str, ifaces: list[Interface]) -> Port:
    speeds = [i.speed_mbps for i in ifaces if i.speed_mbps]
    return Port(
        node=node,
        netdevs=tuple(i.netdev for i in ifaces),
        rdma_devices=tuple(dict.fromkeys(i.rdma_device for i in ifaces if i.rdma_device)),
        address=ifaces[0].ipv4 or "",
        speed_mbps=max(speeds) if speeds else None,
    )


def _connected(names: Sequence[str], edges: set[frozenset[str]]) -> bool:
    seen = {names[0]}
    todo = [names[0]]
    while todo:
        a = todo.pop()
        for e in edges:
            if a in e:
                for b in e - seen:
                    seen.add(b)
                    todo.append(b)
    return len(seen) == len(names)


def wiring_of(nodes: Sequence[NodeFacts]) -> Wiring:
    """Tell the cabling of `nodes` (head first) from their probed ConnectX ports."""
    names = tuple(n.name for n in nodes)
    if len(nodes) <= 1:
        return Wiring(SINGLE, names)
    link_local = _link_local_segments(nodes)
    segments: dict[str, list[tuple[NodeFacts, list[Interface]]]] = {}
    for node in nodes:
        for key, ifaces in _ports(node, link_local).items():
            segments.setdefault(key, []).append((node, ifaces))
    if not segments:
        return Wiring(UNKNOWN, names)
    addresses = {i.ipv4 for n in nodes for i in n.connectx_up if i.ipv4}
    links: list[Link] = []
    notes: list[str] = []
    for key, members in segments.items():
        if len(members) < 2:
            node, ifaces = members[0]
            notes.append(
                f"{node.name} {'/'.join(i.netdev for i in ifaces)} {ifaces[0].ipv4}: "
                "up, but no other node on its subnet"
            )
            continue
        mine = {i.ipv4 for _, ifaces in members for i in ifaces}
        answered = any(
            p in mine and p in addresses for _, ifaces in members for i in ifaces for p in i.peers
        )
        ports = tuple(_port(node.name, ifaces) for node, ifaces in members)
        links.append(Link(key, ports, answered))
    edges = {frozenset((a, b)) for link in links for a in link.nodes for b in link.nodes if a != b}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    unlinked = tuple((a, b) for a, b in pairs if frozenset((a, b)) not in edges)
    every = set(names)
    if any(set(link.nodes) >= every for link in links) and len(nodes) > 2:
        return Wiring(SWITCH, names, tuple(links), (), tuple(notes))
    if not unlinked:
        if len(nodes) == 2:
            kind = PAIR
        elif not all(len(link.ports) == 2 for link in links):
            kind = SWITCH
        else:
            kind = RING if len(nodes) == 3 else MESH
        return Wiring(kind, names, tuple(links), (), tuple(notes))
    if not _connected(names, edges):
        return Wiring(INCOMPLETE, names, tuple(links), unlinked, tuple(notes))
    # A ring: every node linked to exactly two others, in one cycle through all of them.
    degree = {n: sum(1 for e in edges if n in e) for n in names}
    if len(edges) == len(names) and all(d == 2 for d in degree.values()):
        return Wiring(RING, names, tuple(links), unlinked, tuple(notes))
    return Wiring(CHAIN, names, tuple(links), unlinked, tuple(notes))


# Kinds where each cable is its own subnet: only linked nodes reach each other directly.
POINT_TO_POINT = (RING, MESH, CHAIN, INCOMPLETE)


def _has_cycle(wiring: Wiring, group: Sequence[str]) -> bool:
    """Whether the group's nodes can pass data round a ring over their own links (NCCL's
    ring all-reduce needs no more): one link for two, a cycle through all for more."""
    if len(group) <= 1:
        return True
    if len(group) == 2:
        return wiring.linked(group[0], group[1])
    first, rest = group[0], list(group[1:])
    return any(
        all(wiring.linked(a, b) for a, b in zip((first, *order), (*order, first), strict=True))
        for order in itertools.permutations(rest)
    )


def unlinked_groups(
    wiring: Wiring, names: Sequence[str], tp: int, pp: int
) -> list[tuple[str, tuple[str, ...]]]:
    """The groups of a TP x PP (x DP) layout on `names` (rank order) that the wiring cannot
    carry: a tensor-parallel group whose nodes have no ring of links, or two pipeline
    stages whose matching ranks have no link. Data-parallel replicas talk only to the
    rendezvous, so they need no link between them. Empty on a switch or a pair."""
    if wiring.kind not in POINT_TO_POINT:
        return []
    bad: list[tuple[str, tuple[str, ...]]] = []
    size = tp * pp
    for base in range(0, len(names) - size + 1, size):
        stages = [tuple(names[base + s * tp : base + (s + 1) * tp]) for s in range(pp)]
        for stage in stages:
            if not _has_cycle(wiring, stage):
                bad.append(("tensor-parallel group", stage))
        for s in range(pp - 1):
            for a, b in zip(stages[s], stages[s + 1], strict=True):
                if not wiring.linked(a, b):
                    bad.append(("pipeline stages", (a, b)))
    return bad


def fitting_orders(
    wiring: Wiring, names: Sequence[str], tp: int, pp: int, limit: int = 1
) -> list[tuple[str, ...]]:
    """Orders of `names` (the head kept first) whose TP x PP groups the wiring carries."""
    found: list[tuple[str, ...]] = []
    for order in itertools.permutations(names[1:]):
        candidate = (names[0], *order)
        if not unlinked_groups(wiring, candidate, tp, pp):
            found.append(candidate)
            if len(found) >= limit:
                break
    return found


def fitting_layouts(wiring: Wiring, names: Sequence[str]) -> list[tuple[int, int, int]]:
    """Every TP x PP x DP over all of `names` that the wiring carries in their order."""
    n = len(names)
    out = []
    for tp in range(n, 0, -1):
        for pp in range(n // tp, 0, -1):
            if n % (tp * pp) == 0 and not unlinked_groups(wiring, names, tp, pp):
                out.append((tp, pp, n // (tp * pp)))
    return out

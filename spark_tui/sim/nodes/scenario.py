"""Scenario knobs of a simulated cluster, and what each simulated node derives from them."""

from __future__ import annotations

import getpass
import ipaddress
import random
from dataclasses import dataclass, field

GIB = 1024**3
# MemTotal of a real 128 GB GB10 (reference free_kib_gb10.txt); other sizes scale from it.
GB10_128_MEMTOTAL_KB = 125_513_720
DEFAULT_SSH_PORT = 2222
DEFAULT_BASE_ADDRESS = "127.0.0.11"


@dataclass(frozen=True)
class NodeScenario:
    """What one simulated node is: its name, address, memory and ConnectX wiring."""

    index: int  # 1-based, inventory order (node 1 is the head)
    name: str
    hostname: str
    address: str
    memory_gb: int
    page_cache_bytes: int
    cx_port: int  # which ConnectX port (0 or 1) has the cable: it decides the netdev names
    dies_after_ready: float | None
    digest_salt: str  # "" for the common image digests; anything else makes them differ
    # Cabled as a ring: (address of port f0, toward the next node; of port f1, toward the
    # previous), each cable its own /24; the node's address is then on its LAN port.
    ring: tuple[str, str] | None = None
    # Once this file exists, the engine exits (see Scenario.worker_dies_when).
    dies_when: str | None = None

    @property
    def mem_total_kb(self) -> int:
        return round(GB10_128_MEMTOTAL_KB * self.memory_gb / 128)

    @property
    def mem_total_bytes(self) -> int:
        return self.mem_total_kb * 1024


@dataclass
class Scenario:
    """Knobs of a simulated cluster (all simulated: no GPU, no Docker, no root).

    `page_cache_gb` is held on `page_cache_nodes` (1-based; empty = every node) so a fit
    check can show the drop-caches remedy. `worker_dies_after` makes the engine on
    `dying_node` (default: the last node) exit that many seconds after it is ready;
    `worker_dies_when` (a file path) makes it exit, once ready, as soon as that file exists.
    `odd_digest_node` gets image digests that differ from the other nodes'. `cx_ports`
    chooses per node which ConnectX port is cabled (default: 1, 0, 1, 0, ...), so the
    interface names differ between neighbouring nodes as they do on real pairs.
    `ring` cables the nodes as a ring (port f0 to the next node, f1 to the previous, a
    subnet 10.77.K.0/24 per cable K) instead of one cable each on one subnet.
    `ssh_port` 0 picks a free port per node. `base_address` is node 1's loopback address;
    node i gets the next addresses.
    """

    nodes: int = 2
    memory_gb: int = 128
    page_cache_gb: float = 0.0
    page_cache_nodes: tuple[int, ...] = ()
    worker_dies_after: float | None = None
    worker_dies_when: str | None = None
    dying_node: int | None = None
    pace: float | None = None
    token_scale: float | None = None
    odd_digest_node: int | None = None
    cx_ports: tuple[int, ...] = ()
    ring: bool = False
    base_address: str = DEFAULT_BASE_ADDRESS
    ssh_port: int = DEFAULT_SSH_PORT
    user: str = field(default_factory=getpass.getuser)
    name_prefix: str = "sim-spark"

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError("a simulated cluster needs at least one node")
        if self.memory_gb <= 0:
            raise ValueError("memory_gb must be positive")
        base = ipaddress.IPv4Address(self.base_address)
        if not base.is_loopback:
            raise ValueError(f"{self.base_address} is not a loopback address (127.0.0.0/8)")
        if int(base) % 256 + self.nodes > 255:
            raise ValueError(f"{self.base_address} leaves no room for {self.nodes} nodes")

    def node(self, index: int) -> NodeScenario:
        """The scenario of node `index` (1-based)."""
        if not 1 <= index <= self.nodes:
            raise IndexError(index)
        address = str(ipaddress.IPv4Address(self.base_address) + index - 1)
        cache_here = not self.page_cache_nodes or index in self.page_cache_nodes
        dying = self.dying_node if self.dying_node is not None else self.nodes
        cx_port = self.cx_ports[index - 1] if index <= len(self.cx_ports) else index % 2
        return NodeScenario(
            index=index,
            name=f"{self.name_prefix}-{index}",
            hostname=f"{self.name_prefix}-{index}",
            address=address,
            memory_gb=self.memory_gb,
            page_cache_bytes=int(self.page_cache_gb * GIB) if cache_here else 0,
            cx_port=cx_port,
            dies_after_ready=(
                self.worker_dies_after if self.nodes > 1 and index == dying else None
            ),
            digest_salt=f"node{index}" if index == self.odd_digest_node else "",
            ring=ring_addresses(index, self.nodes) if self.ring else None,
            dies_when=self.worker_dies_when if self.nodes > 1 and index == dying else None,
        )

    def all_nodes(self) -> list[NodeScenario]:
        return [self.node(i) for i in range(1, self.nodes + 1)]


def ring_addresses(index: int, nodes: int) -> tuple[str, str]:
    """Node `index`'s (1-based) addresses on a ring of `nodes`: cable K joins node K (.1,
    port f0) and node K+1 (.2, port f1) on 10.77.K.0/24."""
    previous = (index - 2) % nodes + 1
    return f"10.77.{index}.1", f"10.77.{previous}.2"


def random_loopback_base(nodes: int = 2) -> str:
    """A random 127.x.y.z base address, so parallel test runs do not share ports."""
    rng = random.SystemRandom()
    return f"127.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(2, 250 - nodes)}"

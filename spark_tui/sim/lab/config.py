"""The lab's layout: names, addresses and paths of the bridge, the nodes and their daemons."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from spark_tui.core.errors import InputError

DEFAULT_PREFIX = "sparklab"
DEFAULT_SUBNET = "10.77.0.0/24"
DEFAULT_STATE_DIR = Path("/var/lib/spark-tui-lab")
# The image's root filesystem is reused between labs (it only changes with the host's python).
DEFAULT_CACHE_DIR = Path("/var/cache/spark-tui-lab")
MAX_NODES = 32
# What the lab image's `vllm` is: the stand-in (spark_tui.sim.engine) or real vLLM (CPU build).
ENGINES = ("sim", "vllm")
# Unix socket paths are limited to 107 bytes; containerd puts its sockets under the exec-root.
_SOCKET_PATH_LIMIT = 100
# A file that marks a directory as the lab's own, so `down` never deletes someone else's files.
MARKER = ".spark-tui-lab"


# A ring lab's nodes reach each other (SSH, the rendezvous) on the bridge through this
# LAN-like name, the 10 GbE port of a Spark; their ConnectX-named ports are the cables.
LAN_IFNAME = "enP7s7"
# Cable K of a ring lab joins node K (port f0, .1) and node K+1 (port f1, .2) on
# 10.79.K.0/24: inside the namespaces only, never routed on the host.
RING_SUBNET = "10.79.{}.0/24"


def connectx_name(index: int) -> str:
    """The ConnectX-like netdev name of node `index` (1-based); it differs between nodes.

    Node 1 is cabled on `enp1s0f1np1`, node 2 on `enP2p1s0f1np1` (the names real Spark pairs
    show), node k > 2 on `enP<k>p1s0f1np1`. All stay within the kernel's 15 characters.
    """
    return "enp1s0f1np1" if index == 1 else f"enP{index}p1s0f1np1"


@dataclass(frozen=True)
class NodeLayout:
    """One lab node: its namespace, interface, address and the paths of its daemons."""

    index: int
    name: str
    netns: str
    veth_host: str
    veth_peer: str
    ifname: str
    address: str
    dir: Path

    @property
    def cgroup_parent(self) -> str:
        return self.netns

    @property
    def home(self) -> Path:
        return self.dir / "home"

    @property
    def session_bin(self) -> Path:
        """Shims on the PATH of SSH sessions (nvidia-smi, ibdev2netdev)."""
        return self.dir / "bin"

    @property
    def dockerd_bin(self) -> Path:
        """Shims on dockerd's PATH (nvidia-container-runtime-hook)."""
        return self.dir / "dockerd-bin"

    @property
    def docker_socket(self) -> Path:
        """The node's Docker socket as seen from the root namespace."""
        return self.dir / "docker.sock"

    @property
    def data_root(self) -> Path:
        return self.dir / "docker" / "root"

    @property
    def exec_root(self) -> Path:
        return self.dir / "docker" / "exec"

    @property
    def meminfo(self) -> Path:
        return self.dir / "meminfo"

    @property
    def keeper_pidfile(self) -> Path:
        return self.dir / "keeper.pid"

    @property
    def sshd_pidfile(self) -> Path:
        return self.dir / "sshd.pid"

    @property
    def dockerd_pidfile(self) -> Path:
        return self.dir / "dockerd.pid"

    @property
    def host_key(self) -> Path:
        return self.dir / "ssh_host_ed25519_key"

    @property
    def sshd_config(self) -> Path:
        return self.dir / "sshd_config"

    def log(self, what: str) -> Path:
        return self.dir / f"{what}.log"


@dataclass(frozen=True)
class RingCable:
    """One cable of a ring lab: a veth pair from node `a`'s port f0 to node `b`'s port f1
    (`a_end`/`b_end`: its ends' names in the root namespace before they move in)."""

    index: int
    a: NodeLayout
    b: NodeLayout
    a_end: str
    b_end: str
    a_address: str
    b_address: str


@dataclass(frozen=True)
class LabConfig:
    """What `lab up` builds: how many nodes, their memory, and where everything lives.

    `prefix` names the bridge (`<prefix>0`), the namespaces (`<prefix>-n1`...) and the host
    ends of the veths (`<prefix>v1`...); two labs with different prefixes and subnets can run
    side by side. `pace` and `token_scale` are baked into the image for the simulated engine.
    `ring`: the nodes are also cabled as a ring, a veth pair per cable and a subnet per
    cable (see `ring_cables`); the bridge is then their LAN. `engine` is "sim" (the stand-in as `vllm`) or "vllm" (real vLLM's CPU build and a tiny
    model in every node's Hugging Face cache). `registry`: a real registry server in its own
    namespace on the bridge, which the nodes reach as ghcr.io and Docker Hub (see
    sim.lab.registry).
    """

    nodes: int = 2
    memory_gb: int = 128
    page_cache_gb: float = 0.0
    pace: float | None = None
    token_scale: float | None = None
    prefix: str = DEFAULT_PREFIX
    subnet: str = DEFAULT_SUBNET
    state_dir: Path = DEFAULT_STATE_DIR
    cache_dir: Path = DEFAULT_CACHE_DIR
    engine: str = "sim"
    registry: bool = False
    ring: bool = False

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise InputError(
                f"unknown lab engine {self.engine!r}", "pass --engine sim or --engine vllm"
            )
        if not 1 <= self.nodes <= MAX_NODES:
            raise InputError(
                f"a lab has 1 to {MAX_NODES} nodes, not {self.nodes}", "pass --nodes 2"
            )
        if self.memory_gb <= 0:
            raise InputError(f"--memory-gb must be positive, not {self.memory_gb}", "pass 128")
        if not (self.prefix.isalnum() and self.prefix.islower() and 2 <= len(self.prefix) <= 9):
            raise InputError(
                f"lab prefix {self.prefix!r} must be 2-9 lowercase letters or digits",
                "use the default prefix",
            )
        net = ipaddress.IPv4Network(self.subnet)
        if not net.is_private or net.num_addresses < 256:
            raise InputError(f"{self.subnet} must be a private /24 or larger", "use 10.77.0.0/24")
        object.__setattr__(self, "state_dir", Path(self.state_dir).absolute())
        object.__setattr__(self, "cache_dir", Path(self.cache_dir).absolute())
        longest = self.node(self.nodes).exec_root / "containerd" / "containerd-debug.sock"
        if len(str(longest)) > _SOCKET_PATH_LIMIT:
            raise InputError(
                f"the lab's state directory {self.state_dir} is too long for unix sockets",
                "pass a shorter --state-dir (e.g. /var/lib/spark-tui-lab)",
            )

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}0"

    @property
    def bridge_address(self) -> str:
        return str(self.network.network_address + 1)

    @property
    def prefixlen(self) -> int:
        return self.network.prefixlen

    def node(self, index: int) -> NodeLayout:
        """The layout of node `index` (1-based; node 1 is the head)."""
        return NodeLayout(
            index=index,
            name=f"spark-lab-{index}",
            netns=f"{self.prefix}-n{index}",
            veth_host=f"{self.prefix}v{index}",
            veth_peer=f"{self.prefix}p{index}",
            ifname=LAN_IFNAME if self.ring else connectx_name(index),
            address=str(self.network.network_address + 10 + index),
            dir=self.state_dir / "nodes" / f"n{index}",
        )

    def ring_cables(self) -> list[RingCable]:
        """The cables of a ring lab (none otherwise): node K's f0 to node K+1's f1."""
        if not self.ring or self.nodes < 2:
            return []
        out = []
        for k in range(1, self.nodes + 1):
            net = ipaddress.IPv4Network(RING_SUBNET.format(k))
            out.append(
                RingCable(
                    index=k,
                    a=self.node(k),
                    b=self.node(k % self.nodes + 1),
                    a_end=f"{self.prefix}a{k}",
                    b_end=f"{self.prefix}b{k}",
                    a_address=f"{net.network_address + 1}/{net.prefixlen}",
                    b_address=f"{net.network_address + 2}/{net.prefixlen}",
                )
            )
        return out

    @property
    def registry_netns(self) -> str:
        return f"{self.prefix}-reg"

    @property
    def registry_veths(self) -> tuple[str, str]:
        """The registry's veth pair: the bridge's end, the end inside its namespace."""
        return f"{self.prefix}r0", f"{self.prefix}q0"

    @property
    def registry_address(self) -> str:
        return str(self.network.network_address + 2)

    @property
    def registry_url(self) -> str:
        # Port 80: Docker reaches an insecure registry named without a port (ghcr.io) there.
        return f"http://{self.registry_address}"

    @property
    def registry_endpoints(self) -> str:
        """The SPARK_TUI_REGISTRY_ENDPOINTS value that points resolution at the lab's
        registry, standing in for ghcr.io and Docker Hub."""
        return f"ghcr.io={self.registry_url},docker.io={self.registry_url}"

    @property
    def registry_dir(self) -> Path:
        return self.state_dir / "registry"

    def all_nodes(self) -> list[NodeLayout]:
        return [self.node(i) for i in range(1, self.nodes + 1)]

    @property
    def client_key(self) -> Path:
        return self.state_dir / "id_ed25519"

    @property
    def authorized_keys(self) -> Path:
        return self.state_dir / "authorized_keys"

    @property
    def known_hosts(self) -> Path:
        return self.state_dir / "known_hosts"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def image_dir(self) -> Path:
        return self.state_dir / "image"

"""The namespace lab: N simulated Sparks as network namespaces, each with a real OpenSSH sshd
and a real dockerd, for testing SSH, Docker and the orchestration for real (Linux, root).

Each node is one network namespace plus a "keeper" process holding a private mount and UTS
namespace for the node. In that mount namespace the node has its own hostname, its own /run
(a tmpfs, where its dockerd listens on /var/run/docker.sock: the path SSH forwards), its own
sysfs (so /sys/class/net lists the node's interfaces), its own home directory over root's
home, a GB10 /proc/meminfo bind-mounted over the host's, and its own IPC namespace and
/dev/shm (separate machines share no memory: real vLLM decides which ranks are on one node
by opening each other's shared memory, and containers run with `--ipc host`). sshd and dockerd are started in
the keeper's namespaces with `nsenter`, which `ip netns exec` cannot do for dockerd.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from spark_tui.core.errors import InputError, OperationFailed
from spark_tui.core.inventory import InventoryNode, inventory_to_yaml
from spark_tui.sim.lab import dockerd, network, procs, registry, shims, vllm_image
from spark_tui.sim.lab import sshd as sshd_mod
from spark_tui.sim.lab.config import MARKER, LabConfig, NodeLayout
from spark_tui.sim.lab.image import ImageResult, build_and_load
from spark_tui.sim.lab.preflight import require_lab_host, which
from spark_tui.sim.lab.run import run, spawn_detached, wait_for

# Runs as the keeper: it makes the node's mounts, then holds its namespaces by sleeping.
# Values arrive as positional parameters, never inside the script text.
_KEEPER = r"""set -e
hostname "$2"
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/sshd /run/.cgroup
mount --rbind /sys/fs/cgroup /run/.cgroup
mount -t sysfs sysfs /sys
mount --move /run/.cgroup /sys/fs/cgroup
rmdir /run/.cgroup
mount --bind "$3" /proc/meminfo
mount --bind "$4" "$5"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
if [ -n "$6" ]; then mount --bind "$6" /etc/hosts; fi
echo $$ > "$1"
exec sleep infinity
"""


@dataclass
class NodeStatus:
    """How one lab node is doing: its namespace holder, sshd, dockerd and containers."""

    name: str
    address: str
    ifname: str
    keeper: bool
    sshd: bool
    dockerd: bool
    containers: int

    @property
    def healthy(self) -> bool:
        return self.keeper and self.sshd and self.dockerd


@dataclass
class LabInfo:
    """What `up` made: the nodes, the inventory, and the image with its timings."""

    config: dict[str, Any]
    nodes: list[dict[str, Any]]
    inventory: list[dict[str, Any]]
    image: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    # The lab's registry: its address and the SPARK_TUI_REGISTRY_ENDPOINTS value for it.
    registry: dict[str, str] = field(default_factory=dict)


def _tcp_banner(address: str, port: int = 22, timeout: float = 1.0) -> bool:
    with socket.create_connection((address, port), timeout=timeout) as s:
        s.settimeout(timeout)
        return s.recv(64).startswith(b"SSH-")


class Lab:
    """One lab, identified by its config (prefix, subnet, state directory)."""

    def __init__(self, cfg: LabConfig, say: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg
        self.say = say or (lambda _msg: None)

    # --- loading --------------------------------------------------------------------------

    @classmethod
    def load(cls, state_dir: Path, say: Callable[[str], None] | None = None) -> Lab | None:
        """The lab whose state is in `state_dir`, or None when there is none."""
        state = Path(state_dir) / "state.json"
        try:
            data = json.loads(state.read_text())
        except (OSError, ValueError):
            return None
        c = data.get("config", {})
        cfg = LabConfig(
            nodes=int(c["nodes"]),
            memory_gb=int(c["memory_gb"]),
            page_cache_gb=float(c.get("page_cache_gb", 0.0)),
            pace=c.get("pace"),
            token_scale=c.get("token_scale"),
            prefix=str(c["prefix"]),
            subnet=str(c["subnet"]),
            state_dir=Path(state_dir),
            cache_dir=Path(c["cache_dir"]),
            engine=str(c.get("engine", "sim")),
            registry=bool(c.get("registry", False)),
            ring=bool(c.get("ring", False)),
        )
        return cls(cfg, say)

    @property
    def nodes(self) -> list[NodeLayout]:
        return self.cfg.all_nodes()

    def node(self, index: int) -> NodeLayout:
        if not 1 <= index <= self.cfg.nodes:
            raise IndexError(index)
        return self.cfg.node(index)

    # --- up -------------------------------------------------------------------------------

    def up(self) -> LabInfo:
        """Build the lab (cleaning any earlier one with the same prefix first)."""
        require_lab_host()
        started = time.monotonic()
        self._check_state_dir()
        # An earlier lab in this state directory goes first, by what its own state names
        # (it may have had more nodes than this one); files others keep there stay.
        kept = self._foreign_files()
        earlier = Lab.load(self.cfg.state_dir)
        left = earlier.down(quiet=True) if earlier is not None else []
        left += self.down(quiet=True)
        self._restore(kept)
        if left:
            raise OperationFailed(
                "an earlier lab could not be cleaned: " + "; ".join(left),
                "remove those by hand, then run `spark-tui lab up` again",
            )
        try:
            return self._up(started)
        except BaseException:
            self.say("lab up failed: cleaning up what it made")
            self.down(quiet=True)
            raise

    # What the lab itself writes at the top of its state directory.
    _OWN = {
        MARKER,
        "state.json",
        "id_ed25519",
        "id_ed25519.pub",
        "authorized_keys",
        "known_hosts",
        "nodes",
        "image",
        "registry",
    }

    def _foreign_files(self) -> dict[str, bytes]:
        """Small files someone else keeps in the state dir (a test session's owner mark):
        cleaning an earlier lab must not delete them, or the lab looks abandoned meanwhile."""
        d = self.cfg.state_dir
        if not d.is_dir():
            return {}
        return {
            p.name: p.read_bytes()
            for p in d.iterdir()
            if p.name not in self._OWN and p.is_file() and p.stat().st_size < 65536
        }

    def _restore(self, kept: dict[str, bytes]) -> None:
        if not kept:
            return
        self.cfg.state_dir.mkdir(parents=True, exist_ok=True)
        (self.cfg.state_dir / MARKER).touch()
        for name, data in kept.items():
            (self.cfg.state_dir / name).write_bytes(data)

    def _check_state_dir(self) -> None:
        d = self.cfg.state_dir
        if d.exists() and any(d.iterdir()) and not (d / MARKER).exists():
            raise InputError(
                f"{d} is not empty and was not made by the lab",
                "pass an empty or new --state-dir",
            )

    def _up(self, started: float) -> LabInfo:
        cfg = self.cfg
        network.check_subnet_free(cfg)
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
        (cfg.state_dir / MARKER).write_text("made by `spark-tui lab up`; removed by `lab down`\n")
        cfg.image_dir.mkdir(exist_ok=True)
        # Written first, so `lab down` finds a lab whose `up` was interrupted.
        cfg.state_file.write_text(json.dumps({"config": self._config_dict(), "complete": False}))
        sshd_mod.generate_key(cfg.client_key, "spark-tui-lab-client")
        cfg.authorized_keys.write_text(
            cfg.client_key.with_name(cfg.client_key.name + ".pub").read_text()
        )
        network.create_bridge(cfg)
        if cfg.registry:
            self._start_registry()
        for node in self.nodes:
            network.create_node_network(cfg, node)
            self._prepare_node(node)
        cables = cfg.ring_cables()
        for cable in cables:
            network.create_ring_cable(cable)
        for cable in cables:
            network.check_ring_cable(cable, sys.executable)
        self.say(
            f"network: bridge {cfg.bridge} {cfg.bridge_address}/{cfg.prefixlen}, "
            f"{cfg.nodes} namespaces"
            + (f", a ring of {len(cables)} cables (a subnet each)" if cables else "")
        )
        for node in self.nodes:
            self._start_keeper(node)
        for node in self.nodes:
            self._start_dockerd(node)
        for node in self.nodes:
            sock = node.docker_socket
            wait_for(
                f"dockerd of {node.name}", partial(dockerd.ping, sock), 30.0, node.log("dockerd")
            )
        for node in self.nodes:
            self.start_sshd(node.index)
        cfg.known_hosts.write_text(sshd_mod.known_hosts_text(self.nodes))
        self._check_node_to_node()
        image_info = self._vllm_image() if cfg.engine == "vllm" else self._sim_image()
        info = LabInfo(
            config=self._config_dict(),
            nodes=[self._node_dict(n) for n in self.nodes],
            inventory=[n.to_dict() for n in self.inventory_nodes()],
            image=image_info,
            seconds=round(time.monotonic() - started, 2),
            registry=(
                {"url": cfg.registry_url, "endpoints": cfg.registry_endpoints}
                if cfg.registry
                else {}
            ),
        )
        cfg.state_file.write_text(json.dumps({**asdict(info), "complete": True}, indent=2) + "\n")
        return info

    def _sim_image(self) -> dict[str, Any]:
        cfg = self.cfg
        env = shims.engine_env(cfg.memory_gb, cfg.page_cache_gb, cfg.pace, cfg.token_scale)
        image = build_and_load(
            cfg.cache_dir, cfg.image_dir, [n.docker_socket for n in self.nodes], env
        )
        what = "reused" if image.rootfs_cached else f"built in {image.rootfs_seconds:.1f} s"
        self.say(
            f"image: {image.base} root filesystem {what}; engine image loaded into "
            f"{cfg.nodes} dockerd(s) in {image.load_seconds:.1f} s; tags: {', '.join(image.tags)}"
        )
        return asdict(image) if isinstance(image, ImageResult) else {}

    def _vllm_image(self) -> dict[str, Any]:
        """Real vLLM: the cached image loaded into every dockerd, the model in every home."""
        cfg = self.cfg
        started = time.monotonic()
        build = vllm_image.ensure(cfg.cache_dir, say=self.say)
        build_seconds = _since(started)
        load_seconds = vllm_image.load_into([n.docker_socket for n in self.nodes], build)
        for node in self.nodes:
            vllm_image.install_model(Path(build.hub), node.home)
            vllm_image.install_model(Path(build.moe_hub), node.home, build.moe_model)
        what = "found in the cache" if build.cached else f"built in {build_seconds:.0f} s"
        self.say(
            f"image: {build.image} (real vLLM {build.version}, CPU build) {what}; loaded into "
            f"{cfg.nodes} dockerd(s) in {load_seconds:.1f} s; models {build.model} and "
            f"{build.moe_model} in every node's Hugging Face cache"
        )
        return {
            **build.to_dict(),
            "build_seconds": build_seconds,
            "load_seconds": load_seconds,
        }

    def write_recipe(self, folder: Path, *, moe: bool = False) -> Path | None:
        """The recipe for the lab's real-vLLM model (`moe`: its MoE model; None for the
        stand-in's lab)."""
        if self.cfg.engine != "vllm":
            return None
        return vllm_image.write_recipe(folder, self.cfg.nodes, moe=moe)

    def _config_dict(self) -> dict[str, Any]:
        c = self.cfg
        return {
            "nodes": c.nodes,
            "memory_gb": c.memory_gb,
            "page_cache_gb": c.page_cache_gb,
            "pace": c.pace,
            "token_scale": c.token_scale,
            "prefix": c.prefix,
            "subnet": c.subnet,
            "cache_dir": str(c.cache_dir),
            "engine": c.engine,
            "registry": c.registry,
            "ring": c.ring,
        }

    def _node_dict(self, node: NodeLayout) -> dict[str, Any]:
        return {
            "name": node.name,
            "address": node.address,
            "netns": node.netns,
            "ifname": node.ifname,
            "docker_socket": str(node.docker_socket),
            "home": str(node.home),
        }

    def _prepare_node(self, node: NodeLayout) -> None:
        for d in (node.dir, node.home, node.session_bin, node.dockerd_bin, node.data_root):
            d.mkdir(parents=True, exist_ok=True)
        node.exec_root.mkdir(parents=True, exist_ok=True)
        node.meminfo.write_text(shims.meminfo_text(self.cfg.memory_gb, self.cfg.page_cache_gb))
        for path, text in (
            (node.session_bin / "nvidia-smi", shims.NVIDIA_SMI),
            (node.session_bin / "ibdev2netdev", shims.IBDEV2NETDEV),
            (node.dockerd_bin / "nvidia-container-runtime-hook", shims.RUNTIME_HOOK),
            (
                dockerd.runc_wrapper_path(node),
                shims.runc_wrapper(dockerd.real_runc(), str(node.log("runc-limits"))),
            ),
        ):
            path.write_text(text)
            path.chmod(0o755)
        registry_url = self.cfg.registry_url if self.cfg.registry else None
        (node.dir / "daemon.json").write_text(dockerd.daemon_json(node, registry_url))
        if registry_url is not None:
            (node.dir / "hosts").write_text(registry.hosts_text(self.cfg.registry_address))
        sshd_mod.generate_key(node.host_key, node.name)
        node.sshd_config.write_text(sshd_mod.sshd_config(self.cfg, node))

    def _start_keeper(self, node: NodeLayout) -> None:
        nsenter, unshare = which("nsenter"), which("unshare")
        assert nsenter and unshare  # checked by require_lab_host
        import pwd  # Unix only, like the lab

        root_home = pwd.getpwuid(0).pw_dir
        argv = [
            nsenter,
            f"--net={network.NETNS_DIR / node.netns}",
            "--",
            unshare,
            "--mount",
            "--uts",
            "--ipc",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            _KEEPER,
            "spark-lab-keeper",
            str(node.keeper_pidfile),
            node.name,
            str(node.meminfo),
            str(node.home),
            root_home,
            str(node.dir / "hosts") if self.cfg.registry else "",
        ]
        node.keeper_pidfile.unlink(missing_ok=True)
        spawn_detached(argv, node.log("keeper"))
        wait_for(
            f"the namespaces of {node.name}",
            lambda: procs.read_pid(node.keeper_pidfile) is not None,
            10.0,
            node.log("keeper"),
        )

    def keeper_pid(self, index: int) -> int:
        """The process that holds node `index`'s mount and UTS namespaces."""
        node = self.node(index)
        pid = procs.read_pid(node.keeper_pidfile)
        if pid is None:
            raise OperationFailed(
                f"lab node {node.name} is not running", "run `spark-tui lab up` again"
            )
        return pid

    def in_node(self, index: int) -> list[str]:
        """The argv prefix that runs a command inside node `index` (its net, mount, UTS)."""
        nsenter = which("nsenter") or "nsenter"
        return [nsenter, "-t", str(self.keeper_pid(index)), "-n", "-m", "-u", "-i", "--"]

    def _start_registry(self) -> None:
        """The registry server in its own namespace on the bridge (see sim.lab.registry)."""
        cfg = self.cfg
        network.create_registry_network(cfg)
        folder = cfg.registry_dir
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "config.yml"
        config.write_text(registry.config_text(folder / "data", "0.0.0.0:80"))
        log = folder / "registry.log"
        netns = f"--net={network.NETNS_DIR / cfg.registry_netns}"
        nsenter = which("nsenter") or "nsenter"
        spawn_detached([nsenter, netns, registry.registry_binary(), "serve", config], log)
        wait_for("the lab's registry", lambda: registry.answers(cfg.registry_url), 15.0, log)
        self.say(
            f"registry: {cfg.registry_url} stands in for {', '.join(registry.STANDS_IN_FOR)}; "
            f"SPARK_TUI_REGISTRY_ENDPOINTS={cfg.registry_endpoints}"
        )

    def _start_dockerd(self, node: NodeLayout) -> None:
        spawn_detached(
            [*self.in_node(node.index), *dockerd.dockerd_argv(node)],
            node.log("dockerd"),
            env=dockerd.dockerd_env(node),
        )

    def _check_node_to_node(self) -> None:
        """Node 1 must reach node 2's sshd across the bridge (rendezvous goes that way)."""
        if self.cfg.nodes < 2:
            return
        target = self.node(2).address
        code = (
            "import socket,sys; s=socket.create_connection((sys.argv[1], 22), 3); "
            "print(s.recv(16)[:4].decode())"
        )
        # Only the network namespace: the node's mount namespace hides root's home (and any
        # interpreter installed there).
        netns = f"--net={network.NETNS_DIR / self.node(1).netns}"
        proc = run(["nsenter", netns, sys.executable, "-S", "-c", code, target], check=False)
        if proc.stdout.strip() != "SSH-":
            raise OperationFailed(
                f"lab node 1 cannot reach node 2 ({target}) across bridge {self.cfg.bridge}",
                "the host filters bridged traffic (br_netfilter with a FORWARD policy of DROP); "
                "allow traffic on the lab's bridge or unload br_netfilter",
            )

    # --- sshd control (tests use these to break and restore a node) -----------------------

    def sshd_pids(self, index: int) -> set[int]:
        """Every sshd process of node `index`: the listener and one per connection."""
        node = self.node(index)
        binary = os.path.realpath(sshd_mod.sshd_binary())
        netns = procs.netns_file_id(network.NETNS_DIR / node.netns)
        found = set()
        for pid in procs.pids_in_namespaces([netns] if netns else []):
            try:
                if os.path.realpath(f"/proc/{pid}/exe") == binary:
                    found.add(pid)
            except OSError:
                continue
        return found

    def start_sshd(self, index: int) -> None:
        node = self.node(index)
        spawn_detached(
            [*self.in_node(index), sshd_mod.sshd_binary(), "-D", "-e", "-f", str(node.sshd_config)],
            node.log("sshd"),
        )
        wait_for(f"sshd of {node.name}", lambda: _tcp_banner(node.address), 10.0, node.log("sshd"))

    def stop_sshd(self, index: int) -> None:
        """Stop node `index`'s sshd and drop every SSH connection to it (a node going away).
        Until the listener has gone it may still accept a client that reconnects at once:
        such late sessions are ended too, round after round, until none is left."""
        left: set[int] = set()
        for _ in range(5):
            pids = self.sshd_pids(index)
            if not pids:
                return
            left = procs.terminate(pids, grace=2.0)
            if left:
                break
        raise OperationFailed(
            f"sshd of {self.node(index).name} did not stop: {sorted(left or self.sshd_pids(index))}",
            "run `spark-tui lab down`",
        )

    def restart_sshd(self, index: int) -> None:
        """Drop every connection to node `index` and start its sshd again."""
        self.stop_sshd(index)
        self.start_sshd(index)

    # --- inventory and status -------------------------------------------------------------

    def inventory_nodes(self) -> list[InventoryNode]:
        """How to reach the lab's nodes over SSH (head first)."""
        return [
            InventoryNode(
                name=n.name,
                host=n.address,
                port=22,
                user="root",
                identity_file=str(self.cfg.client_key),
                known_hosts=str(self.cfg.known_hosts),
            )
            for n in self.nodes
        ]

    def write_inventory(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "# spark-tui lab (simulated Sparks: network namespaces with real sshd and dockerd)\n"
            + inventory_to_yaml(self.inventory_nodes())
        )

    def status(self) -> list[NodeStatus]:
        out = []
        for node in self.nodes:
            keeper = procs.read_pid(node.keeper_pidfile) is not None
            try:
                ssh_ok = keeper and _tcp_banner(node.address, timeout=1.0)
            except OSError:
                ssh_ok = False
            docker_ok = dockerd.ping(node.docker_socket)
            count = len(dockerd.containers(node.docker_socket)) if docker_ok else 0
            out.append(
                NodeStatus(node.name, node.address, node.ifname, keeper, ssh_ok, docker_ok, count)
            )
        return out

    # --- down -----------------------------------------------------------------------------

    def down(self, quiet: bool = False) -> list[str]:
        """Remove every process, cgroup, mount, namespace, link and file of this lab: the
        names its config gives (its nodes' namespaces, veths, bridge and cgroups) and what
        its state directory holds, nothing matched by a pattern. Idempotent.
        Returns what could not be removed (empty when all went)."""
        cfg = self.cfg
        left: list[str] = []
        sockets = sorted(cfg.state_dir.glob("nodes/n*/docker.sock"))
        with ThreadPoolExecutor(max_workers=max(1, len(sockets))) as pool:
            list(pool.map(_remove_containers_quietly, sockets))
        namespaces = network.own_namespaces(cfg)
        ids = {procs.netns_file_id(network.NETNS_DIR / ns) for ns in namespaces}
        ids.discard(None)
        host_mnt = procs.ns_id(os.getpid(), "mnt")
        host_net = procs.ns_id(os.getpid(), "net")
        # A keeper whose namespace name is gone still holds the node's namespaces.
        for pidfile in cfg.state_dir.glob("nodes/n*/keeper.pid"):
            pid = procs.read_pid(pidfile)
            if pid is not None and _comm(pid) == "sleep":
                net = procs.ns_id(pid, "net")
                if net and net != host_net:
                    ids.add(net)
        pids = procs.pids_in_namespaces(i for i in ids if i)
        # The keepers' mount namespaces hold dockerd, containerd and the shims.
        mnt_ids = {procs.ns_id(p, "mnt") for p in pids} - {host_mnt, None}
        all_ids = {i for i in ids | mnt_ids if i}
        cgroups = _lab_cgroups(cfg)
        # dockerd first, so it can stop containerd and the shims in order.
        dockerds = {p for p in pids if _comm(p) == "dockerd"}
        procs.terminate(dockerds, grace=5.0)
        for _ in range(3):
            victims = procs.pids_in_namespaces(all_ids)
            for cg in cgroups:
                victims |= procs.pids_in_cgroups(cg)
            if not victims:
                break
            survivors = procs.terminate(victims, grace=2.0)
            if survivors:
                left.append(f"processes {sorted(survivors)}")
        for cg in cgroups:
            left.extend(f"cgroup {p}" for p in procs.remove_cgroups(cg))
        for point in procs.mounts_under(cfg.state_dir):
            if run(["umount", "-l", point], check=False).returncode != 0:
                left.append(f"mount {point}")
        left.extend(network.delete_network(cfg))
        if not left:
            left.extend(_remove_state_dir(cfg.state_dir))
        if not quiet:
            self.say("lab down: " + ("everything removed" if not left else "; ".join(left)))
        return left


def _since(t: float) -> float:
    return round(time.monotonic() - t, 1)


def _remove_containers_quietly(sock: Path) -> None:
    try:
        if dockerd.ping(sock, timeout=1.0):
            dockerd.remove_all_containers(sock)
    except OSError:
        pass


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _lab_cgroups(cfg: LabConfig) -> list[str]:
    """Names of the lab's cgroups that exist (each node's dockerd uses its namespace's name,
    `<prefix>-n<i>`, as the cgroup parent)."""
    wanted = {n.cgroup_parent for n in cfg.all_nodes()}
    names: set[str] = set()
    root = Path("/sys/fs/cgroup")
    for base in [root, *[p for p in root.iterdir() if p.is_dir()]] if root.is_dir() else []:
        try:
            names.update(p.name for p in base.iterdir() if p.is_dir() and p.name in wanted)
        except OSError:
            continue
    return sorted(names)


def _remove_state_dir(state_dir: Path) -> list[str]:
    """Delete the lab's state directory, but only one the lab made (it holds the marker)."""
    if not state_dir.exists():
        return []
    if not (state_dir / MARKER).exists():
        return []
    if procs.mounts_under(state_dir):
        return [f"mounts remain under {state_dir}"]
    # A dockerd's data root can hold gigabytes (the real-vLLM image) and its last shims may
    # still be letting go of files: try again for a few seconds before reporting it.
    for _ in range(10):
        shutil.rmtree(state_dir, ignore_errors=True)
        if not state_dir.exists():
            return []
        time.sleep(0.5)
    return [f"directory {state_dir}"]

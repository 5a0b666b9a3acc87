"""One simulated DGX Spark: an SSH server on its loopback address, a Docker API, a home."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncssh

from spark_tui.core.plan import LABEL_PREFIX
from spark_tui.remote import link_sample
from spark_tui.remote import probe_commands as pc
from spark_tui.sim.nodes import gb10
from spark_tui.sim.nodes.commands import END_TIMEOUT_S, RealCommands, kill_group
from spark_tui.sim.nodes.docker_api import DockerApiServer
from spark_tui.sim.nodes.docker_engine import SimContainer, SimDockerEngine
from spark_tui.sim.nodes.hf_cache import populate_hf_cache
from spark_tui.sim.nodes.images import make_image
from spark_tui.sim.nodes.scenario import NodeScenario
from spark_tui.sim.nodes.ssh_server import NodeSSHServer, process_handler

_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# `echo 1|3 > /proc/sys/vm/drop_caches` in any spelling (sudo sh -c, tee): the remedy for
# page cache holding memory. The simulated node drops its simulated cache, not the host's.
_DROP_CACHES = re.compile(
    r"echo\s+['\"]?([123])['\"]?\s*(?:>|\|\s*(?:sudo\s+)?tee)[^;&|]*drop_caches"
)
_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes
_CLUSTER_LABEL = LABEL_PREFIX + "cluster"


def load_or_create_key(path: Path) -> asyncssh.SSHKey:
    """An ed25519 private key kept at `path` (made on first use, mode 0600)."""
    if path.exists():
        return asyncssh.read_private_key(str(path))
    key = asyncssh.generate_private_key("ssh-ed25519", comment=path.stem)
    key.write_private_key(str(path))
    key.write_public_key(str(path) + ".pub")
    os.chmod(path, 0o600)
    return key


def write_vllm_shim(bin_dir: Path, python: str) -> Path:
    """A `vllm` executable that runs the simulated engine (for `bash -c "vllm serve ..."`)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "vllm"
    shim.write_text(
        f"#!/bin/sh\n# simulated vllm (spark-tui): the stand-in engine\n"
        f'exec "{python}" -m spark_tui.sim.engine "$@"\n'
    )
    shim.chmod(0o755)
    return bin_dir


class SimNode:
    """A simulated Spark (simulated: no GPU, no Docker, no root).

    Attributes other layers use: `name`, `hostname`, `address` (its loopback address, also
    its ConnectX IPv4), `port` (SSH), `user`, `home` (a real directory holding its Hugging
    Face cache), `docker_socket` (its Docker API), `host_key` (its public host key),
    `engine` (its containers). `page_cache_bytes` can be changed at run time.
    """

    def __init__(
        self,
        scenario: NodeScenario,
        peers: list[NodeScenario],
        state_dir: Path,
        *,
        user: str,
        client_key: asyncssh.SSHKey,
        ssh_port: int,
        image_refs: list[str],
        shim_dir: Path,
        socket_dir: Path,
        pace: float | None = None,
        token_scale: float | None = None,
    ) -> None:
        self.scenario = scenario
        self.peers = peers
        self.name = scenario.name
        self.hostname = scenario.hostname
        self.address = scenario.address
        self.user = user
        self.state_dir = state_dir
        self.home = state_dir / "home"
        self.requested_port = ssh_port
        self.port = ssh_port
        self.pace = pace
        self.token_scale = token_scale
        self.page_cache_bytes = scenario.page_cache_bytes
        self.authorized_keys = asyncssh.import_authorized_keys(
            client_key.export_public_key().decode()
        )
        self.host_key_path = state_dir / "ssh_host_ed25519_key"
        self.docker_socket = socket_dir / f"{scenario.index}.docker.sock"
        self.shim_dir = shim_dir
        self.images = [make_image(ref, scenario.digest_salt) for ref in image_refs]
        self.engine = SimDockerEngine(
            hostname=self.hostname,
            home=self.home,
            state_dir=state_dir,
            shim_dir=shim_dir,
            images=self.images,
            node_env=self.engine_env,
            mem_total_bytes=scenario.mem_total_bytes,
        )
        self.docker = DockerApiServer(self.engine, self.docker_socket, self._docker_info)
        self._host_key: asyncssh.SSHKey | None = None
        self._server: Any = None
        self.connections: set[asyncssh.SSHServerConnection] = set()
        self.commands = RealCommands()  # the commands it runs for real, while they run
        self.exec_sessions = 0  # exec sessions opened on its SSH server (what a probe costs)
        self.connections_accepted = 0  # SSH connections made to it, ever (handshakes)
        # Every node of the simulation (the cluster sets it): a rank's link traffic is its
        # cluster's, which the head's engine writes on the head's node.
        self.cluster_nodes: list[SimNode] = [self]
        self.started_at = time.monotonic()
        self._link_seen: dict[str, int] = {}
        self._link_total = 0

    # ---- facts the node answers with ---------------------------------------------------

    @property
    def peer_addresses(self) -> set[str]:
        return {p.address for p in self.peers if p.index != self.scenario.index}

    @property
    def host_key(self) -> asyncssh.SSHKey:
        if self._host_key is None:
            raise RuntimeError("the node has not started")
        return self._host_key

    def memory(self) -> gb10.Memory:
        """Memory now: the scenario's, minus what running engines hold."""
        return gb10.memory_state(self.scenario, self.page_cache_bytes, self.engine.held_bytes())

    def engine_env(self, container: SimContainer) -> dict[str, str]:
        """The `SPARK_SIM_*` knobs a container's engine reads (spark_tui.sim.engine.settings)."""
        mem = self.memory()
        env = {
            "SPARK_SIM_MEM_TOTAL_BYTES": str(mem.total * 1024),
            "SPARK_SIM_MEM_AVAILABLE_BYTES": str(mem.available * 1024),
            "SPARK_SIM_PAGE_CACHE_BYTES": str(mem.page_cache_held * 1024),
            "SPARK_SIM_BIND_ADDRESS": self.address,
            "SPARK_SIM_LINK_FILE": str(self.link_file(container)),
            "SPARK_SIM_OWNER_PID": str(os.getpid()),
        }
        self.link_file(container).parent.mkdir(parents=True, exist_ok=True)
        if self.pace is not None:
            env["SPARK_SIM_PACE"] = str(self.pace)
        if self.token_scale is not None:
            env["SPARK_SIM_TOKEN_SCALE"] = str(self.token_scale)
        if self.scenario.dies_after_ready is not None:
            env["SPARK_SIM_DIE_AFTER_READY_S"] = str(self.scenario.dies_after_ready)
        if self.scenario.dies_when is not None:
            env["SPARK_SIM_DIE_WHEN_PATH"] = self.scenario.dies_when
        return env

    def link_file(self, container: SimContainer) -> Path:
        """Where `container`'s engine writes its simulated link traffic."""
        return self.state_dir / "link" / f"{container.id}.bytes"

    def cluster_link_bytes(self, cluster_id: str) -> int:
        """The link traffic written by this node's engines of `cluster_id` (0: none)."""
        best = 0
        for c in list(self.engine.containers.values()):
            if c.labels.get(_CLUSTER_LABEL) != cluster_id:
                continue
            with contextlib.suppress(OSError, ValueError):
                best = max(best, int(self.link_file(c).read_text().strip() or 0))
        return best

    def engine_link_bytes(self) -> int:
        """Bytes this node's ranks sent (and received) over the link since the simulation
        began: only ever rises, as a real counter does across containers that come and go."""
        running = {
            c.labels.get(_CLUSTER_LABEL) for c in self.engine.containers.values() if c.running
        }
        for cid in sorted(i for i in running if i):
            now = max(n.cluster_link_bytes(cid) for n in self.cluster_nodes)
            self._link_total += max(0, now - self._link_seen.get(cid, 0))
            self._link_seen[cid] = now
        return self._link_total

    def uptime(self) -> float:
        """Seconds since the simulated node booted."""
        return gb10.BOOT_UPTIME_S + time.monotonic() - self.started_at

    def _docker_info(self) -> dict[str, Any]:
        return {
            "Name": self.hostname,
            "ID": f"SIM-{self.scenario.index:04d}",
            "MemTotal": self.scenario.mem_total_bytes,
        }

    def gpu_processes(self) -> list[gb10.GpuProcess]:
        return [
            gb10.GpuProcess(c.pid, "python3", c.held_bytes // (1024 * 1024))
            for c in self.engine.containers.values()
            if c.running and c.held_bytes
        ]

    def answer(self, command: str) -> tuple[str, int] | None:
        """What the node prints for a command it answers itself (None: run it for real)."""
        cmd = command.strip()
        match = _DROP_CACHES.search(cmd)
        if match:
            self.page_cache_bytes = 0
            return (f"{match.group(1)}\n" if "tee" in cmd else ""), 0
        if cmd in (pc.HOSTNAME, "hostname"):
            return self.hostname + "\n", 0
        if cmd in (pc.ARCH, "uname -m"):
            return "aarch64\n", 0
        if cmd == pc.HOME:
            return f"{self.home}\n", 0
        if cmd == pc.DOCKER_HOST_ENV:
            return self.shell_env()["DOCKER_HOST"] + "\n", 0
        if cmd == pc.NVIDIA_SMI:
            return gb10.nvidia_smi(datetime.now(), self.gpu_processes()), 0
        if cmd == pc.NVIDIA_SMI_QUERY:
            return gb10.nvidia_smi_query(), 0
        if cmd in (pc.MEMINFO, "cat /proc/meminfo"):
            return gb10.meminfo(self.memory()), 0
        if cmd == pc.IBDEV2NETDEV:
            return gb10.ibdev2netdev(self.scenario), 0
        if cmd == pc.IP_ADDR_JSON:
            return gb10.ip_addr_json(self.scenario), 0
        if cmd == pc.IP_NEIGH_JSON:
            return gb10.ip_neigh_json(self.scenario, self.peers), 0
        if cmd == pc.IP_JSON:  # `ip -j -batch`: each command's array on its own line
            addr = gb10.ip_addr_json(self.scenario)
            return addr + gb10.ip_neigh_json(self.scenario, self.peers), 0
        if cmd == pc.NET_SPEEDS:
            return gb10.net_speeds(self.scenario), 0
        if cmd.startswith(link_sample.COMMAND_START):
            return gb10.link_sample(
                self.scenario,
                self.memory(),
                link_sample.interfaces_of(cmd),
                self.uptime(),
                self.engine_link_bytes(),
            )
        if cmd in ("free", "free -k"):
            return gb10.free(self.memory()), 0
        if cmd == "free -b":
            return gb10.free(self.memory(), unit=1), 0
        return None

    async def answer_probe(self) -> str:
        """The output of the combined probe: each section answered as `answer` does, the
        sections it does not answer run for real in the node's home, all at once."""
        keys = list(pc.SECTIONS)
        results = await asyncio.gather(*(self._probe_section(pc.SECTIONS[k]) for k in keys))
        return pc.render_combined(dict(zip(keys, results, strict=True)))

    async def _probe_section(self, command: str) -> tuple[str, str, int]:
        answer = self.answer(command)
        if answer is not None:
            return answer[0], "", answer[1]
        # Held so that stopping the node kills a section still running and waits for it.
        child = await self.commands.start(
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.shell_env(),
            cwd=str(self.home),
        )
        try:
            if self.commands.closing:  # the node stopped while the command was being started
                raise asyncio.CancelledError
            out, err = await child.communicate()
        except BaseException:
            # The probe went away (its connection, the node, the demo): the command must
            # not outlive it, e.g. blocked writing into a pipe nobody reads any more.
            kill_group(child.pid)
            # Seen to exit before the probe gives up: a transport left to the garbage
            # collector closes itself on a loop that may be gone by then. GeneratorExit (the
            # coroutine closed with its loop) is not swallowed.
            # As long as the node's own end waits for one: a loaded machine (two cores
            # running real vLLM beside the tests) took more than 5 s to see the exit.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(child.wait(), END_TIMEOUT_S)
            raise
        code = child.returncode or 0
        return (
            out.decode(errors="replace"),
            err.decode(errors="replace"),
            128 - code if code < 0 else code,
        )

    def shell_env(self) -> dict[str, str]:
        """The environment of a command run for real: the node's home, its Docker socket."""
        return {
            "PATH": f"{self.shim_dir}:{_SYSTEM_PATH}",
            "HOME": str(self.home),
            "USER": self.user,
            "LOGNAME": self.user,
            "SHELL": "/bin/sh",
            "LANG": "C.UTF-8",
            "HOSTNAME": self.hostname,
            "DOCKER_HOST": f"unix://{self.docker_socket}",
        }

    # ---- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        populate_hf_cache(self.home)
        self._host_key = load_or_create_key(self.host_key_path)
        await self.docker.start()
        self._server = await asyncssh.create_server(
            lambda: NodeSSHServer(self),
            self.address,
            self.requested_port,
            server_host_keys=[self._host_key],
            process_factory=process_handler(self),
            encoding=None,
            allow_scp=False,
            agent_forwarding=False,
            x11_forwarding=False,
        )
        sockets = self._server.sockets
        self.port = sockets[0].getsockname()[1] if sockets else self.requested_port

    async def close(self) -> None:
        """Stop serving, drop every SSH connection, kill every process this node started
        and wait for each to end."""
        self.commands.closing = True
        if self._server is not None:
            self._server.close()
        # Closing the listener keeps open connections: close them, which ends their commands.
        # Before waiting for the listener: from Python 3.12 on, its wait_closed also waits
        # for every connection it accepted to end.
        for conn in list(self.connections):
            conn.close()
        for conn in list(self.connections):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None
        await self.commands.end()
        await self.engine.close()
        await self.docker.close()


def socket_dir_for(state_dir: Path) -> tuple[Path, bool]:
    """Where the Docker sockets live: the state dir, or a short temp dir when its path is
    too long for a unix socket. The flag says whether the dir is temporary."""
    candidate = state_dir / "sockets"
    if len(str(candidate)) + 20 <= _SOCKET_PATH_MAX:
        candidate.mkdir(parents=True, exist_ok=True)
        return candidate, False
    return Path(tempfile.mkdtemp(prefix="sparksim-")), True


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)

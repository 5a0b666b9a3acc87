"""The simulated Docker daemon of one node: images, containers and their processes.

A container is a process group on this machine (no isolation: simulated). An argv that
starts with `vllm` runs the vLLM stand-in (`python -m spark_tui.sim.engine`); any other
argv runs as given, with a `vllm` shim first on PATH so `bash -c "vllm serve ..."` works.
A simulated container has no root filesystem of its own: an archive put into it (the
mods) is extracted into the container's folder, and paths under the top-level folders it
made (`/workspace/...`) are mapped there in the argv when the container starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import secrets
import shlex
import shutil
import signal
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from spark_tui.sim.nodes.container_logs import STDERR, STDOUT, LogBuffer
from spark_tui.sim.nodes.images import SimImage

# Where `import spark_tui` comes from: the engine subprocess gets it on PYTHONPATH.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
_NAME_RE = re.compile(r"^/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_RUNTIMES = ("", "runc", "io.containerd.runc.v2", "nvidia")
_DEFAULT_GPU_UTIL = 0.9  # vLLM's default --gpu-memory-utilization
# A killed container is reaped in milliseconds; on a loaded machine (two cores running real
# vLLM beside the tests) seeing its exit took seconds.
CLOSE_TIMEOUT_S = 15.0


class DockerError(Exception):
    """An error the Docker API answers with an HTTP status and `{"message": ...}`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class SimContainer:
    """A simulated container: its create request, its state and its log."""

    id: str
    name: str
    image: SimImage
    image_ref: str
    config: dict[str, Any]
    host_config: dict[str, Any]
    created_ns: int
    argv: list[str]
    log: LogBuffer
    status: str = "created"  # created | running | exited | removing
    pid: int = 0
    exit_code: int = 0
    error: str = ""
    started_ns: int = 0
    finished_ns: int = 0
    held_bytes: int = 0
    process: asyncio.subprocess.Process | None = None
    stop_requested: bool = False
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    removed: asyncio.Event = field(default_factory=asyncio.Event)
    readers: list[asyncio.Task[None]] = field(default_factory=list)
    root: Path | None = None  # where archives put into the container are extracted
    root_tops: set[str] = field(default_factory=set)  # top-level folders they made

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.config.get("Labels") or {})

    @property
    def env(self) -> list[str]:
        return list(self.config.get("Env") or [])


def _argv_of(body: dict[str, Any], image: SimImage) -> list[str]:
    entry = body.get("Entrypoint")
    cmd = body.get("Cmd")
    if isinstance(entry, str):
        entry = shlex.split(entry)
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    if entry:
        # Docker: a container Entrypoint drops the image's Cmd unless Cmd is given.
        return [*entry, *(cmd or [])]
    return list(cmd or ["/bin/bash"])


def _env_dict(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


# Flags with which `vllm` prints and exits before any engine starts.
_PRINT_ONLY = frozenset({"-h", "--help", "--version"})


def gpu_memory_utilization(argv: list[str]) -> float | None:
    """The `--gpu-memory-utilization` a vLLM argv asks for (vLLM's default when absent);
    None when the argv does not start an engine (not vLLM, or `serve --help`, `--version`:
    those print and exit without touching the GPU, so they hold no memory)."""
    joined = " ".join(argv)
    if not (argv and os.path.basename(argv[0]) == "vllm") and "vllm serve" not in joined:
        return None
    words = joined.replace("=", " ").split()
    if "serve" not in words or any(w in _PRINT_ONLY for w in words):
        return None
    for i, word in enumerate(words[:-1]):
        if word == "--gpu-memory-utilization":
            with contextlib.suppress(ValueError):
                return float(words[i + 1].strip("'\""))
    return _DEFAULT_GPU_UTIL


def exit_code_of(returncode: int) -> int:
    """Docker's exit code: a process killed by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class SimDockerEngine:
    """Images and containers of one simulated node.

    `node_env()` gives the `SPARK_SIM_*` variables describing the node at this moment
    (memory, page cache, bind address, pace); `held_changed` is called when a container
    starts or stops, since running engines hold unified memory.
    """

    def __init__(
        self,
        *,
        hostname: str,
        home: Path,
        state_dir: Path,
        shim_dir: Path,
        images: list[SimImage],
        node_env: Callable[[SimContainer], dict[str, str]],
        mem_total_bytes: int,
    ) -> None:
        self.hostname = hostname
        self.home = home
        self.state_dir = state_dir
        self.shim_dir = shim_dir
        self.images = images
        self.node_env = node_env
        self.mem_total_bytes = mem_total_bytes
        self.containers: dict[str, SimContainer] = {}
        # Set once the node began to close: no container may start now. A start already
        # past its check, and every container's reaping, is waited for by `close`.
        self.closing = False
        self._starting: set[asyncio.Future[None]] = set()
        self._reaping: set[asyncio.Task[None]] = set()

    # ---- lookups ----------------------------------------------------------------------

    def find_image(self, ref: str) -> SimImage | None:
        return next((i for i in self.images if i.matches(ref)), None)

    def get_image(self, ref: str) -> SimImage:
        image = self.find_image(ref)
        if image is None:
            raise DockerError(404, f"No such image: {ref}")
        return image

    def find_container(self, ref: str) -> SimContainer | None:
        ref = ref.lstrip("/")
        if ref in self.containers:
            return self.containers[ref]
        for c in self.containers.values():
            if c.name == ref:
                return c
        matches = [c for c in self.containers.values() if c.id.startswith(ref)]
        return matches[0] if len(matches) == 1 and ref else None

    def get_container(self, ref: str) -> SimContainer:
        c = self.find_container(ref)
        if c is None:
            raise DockerError(404, f"No such container: {ref}")
        return c

    def held_bytes(self) -> int:
        """Unified memory held by running engine containers."""
        return sum(c.held_bytes for c in self.containers.values() if c.running)

    # ---- lifecycle --------------------------------------------------------------------

    def create(self, body: dict[str, Any], name: str | None) -> SimContainer:
        ref = body.get("Image") or ""
        if not ref:
            raise DockerError(400, "config.Image is empty: give the image to run")
        image = self.get_image(ref)
        if name:
            if not _NAME_RE.match(name):
                raise DockerError(
                    400,
                    f"Invalid container name ({name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed",
                )
            name = name.lstrip("/")
            clash = self.find_container(name)
            if clash is not None and clash.name == name:
                raise DockerError(
                    409,
                    f'Conflict. The container name "/{name}" is already in use by container '
                    f'"{clash.id}". You have to remove (or rename) that container to be able '
                    "to reuse that name.",
                )
        host_config = dict(body.get("HostConfig") or {})
        runtime = host_config.get("Runtime") or ""
        if runtime not in _RUNTIMES:
            raise DockerError(400, f"unknown or invalid runtime name: {runtime}")
        for request in host_config.get("DeviceRequests") or []:
            driver = request.get("Driver") or ""
            if driver not in ("", "nvidia"):
                caps = request.get("Capabilities") or []
                raise DockerError(
                    500,
                    f'could not select device driver "{driver}" with capabilities: {caps}',
                )
        cid = secrets.token_hex(32)
        name = name or f"sim_{cid[:12]}"
        # Inspect's Config is the create body without the host and network parts.
        config = {k: v for k, v in body.items() if k not in ("HostConfig", "NetworkingConfig")}
        config["Image"] = ref
        env = _env_dict(image.env)
        env.update(_env_dict(list(body.get("Env") or [])))
        config["Env"] = [f"{k}={v}" for k, v in env.items()]
        labels = dict(image.labels)
        labels.update(body.get("Labels") or {})
        config["Labels"] = labels
        if not config.get("Hostname"):
            host_net = host_config.get("NetworkMode") == "host"
            config["Hostname"] = self.hostname if host_net else cid[:12]
        config["Tty"] = bool(config.get("Tty"))
        log_dir = self.state_dir / "containers" / cid
        log_dir.mkdir(parents=True, exist_ok=True)
        container = SimContainer(
            id=cid,
            name=name,
            image=image,
            image_ref=ref,
            config=config,
            host_config=host_config,
            created_ns=time.time_ns(),
            argv=_argv_of(body, image),
            log=LogBuffer(log_dir / f"{cid}-json.log"),
        )
        self.containers[cid] = container
        return container

    def _process_env(self, c: SimContainer) -> dict[str, str]:
        env = {"PATH": _SYSTEM_PATH, "HOSTNAME": c.config.get("Hostname") or self.hostname}
        env.update(_env_dict(c.env))
        env["PATH"] = f"{self.shim_dir}:{env.get('PATH') or _SYSTEM_PATH}"
        # The simulated container has no root file system of its own: its home is the node's.
        env["HOME"] = str(self.home)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p
        )
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.node_env(c))
        return env

    def put_archive(self, c: SimContainer, path: str, data: bytes) -> None:
        """Extract a tar into the container at `path` (its folder must exist, as in Docker)."""
        if not path.startswith("/"):
            raise DockerError(400, f"path {path!r} is not absolute")
        root = self.state_dir / "containers" / c.id / "root"
        target = root / path.strip("/")
        if path.strip("/") and not (target.is_dir() or Path(path).is_dir()):
            raise DockerError(404, f"Could not find the file {path} in container {c.name}")
        target.mkdir(parents=True, exist_ok=True)
        c.root = root
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                names = tar.getnames()
                tar.extractall(target, filter="data")  # no member may leave the folder
        except (tarfile.TarError, OSError) as exc:
            raise DockerError(400, f"could not extract the archive: {exc}") from None
        rel = PurePosixPath(path.strip("/"))
        for name in names:
            first = (rel / name.removeprefix("./")).parts[:1]
            if first:
                c.root_tops.add(first[0])

    def _map_paths(self, c: SimContainer, argv: list[str]) -> list[str]:
        """argv with paths under the archive-made top folders pointed into c.root."""
        if c.root is None or not c.root_tops:
            return argv
        tops = "|".join(re.escape(t) for t in sorted(c.root_tops))
        pattern = re.compile(rf"(?<![\w.-])/(?=(?:{tops})(?:/|\b))")
        return [pattern.sub(str(c.root) + "/", arg) for arg in argv]

    async def start(self, c: SimContainer) -> None:
        if c.running:
            raise DockerError(304, "container already started")
        if self.closing:
            raise DockerError(500, "the Docker daemon is shutting down")
        starting = asyncio.get_running_loop().create_future()
        self._starting.add(starting)
        try:
            await self._start(c)
        finally:
            self._starting.discard(starting)
            starting.set_result(None)

    async def _start(self, c: SimContainer) -> None:
        argv = self._map_paths(c, list(c.argv))
        if argv and os.path.basename(argv[0]) == "vllm":
            argv = [sys.executable, "-m", "spark_tui.sim.engine", *argv[1:]]
        workdir = c.config.get("WorkingDir") or ""
        cwd = workdir if workdir and Path(workdir).is_dir() else str(self.home)
        util = gpu_memory_utilization(c.argv)
        c.held_bytes = int(util * self.mem_total_bytes) if util else 0
        env = self._process_env(c)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,  # its own process group: stop/kill reach every child
                limit=1 << 20,
            )
        except (FileNotFoundError, PermissionError) as exc:
            c.exit_code = 127 if isinstance(exc, FileNotFoundError) else 126
            c.error = (
                "failed to create task for container: failed to create shim task: OCI "
                "runtime create failed: runc create failed: unable to start container "
                f'process: exec: "{c.argv[0] if c.argv else ""}": executable file not found '
                "in $PATH: unknown"
            )
            raise DockerError(400, c.error) from None
        c.process = proc
        c.pid = proc.pid
        c.status = "running"
        c.exit_code = 0
        c.error = ""
        c.stop_requested = False
        c.started_ns = time.time_ns()
        c.finished_ns = 0
        c.exited = asyncio.Event()
        c.log.reopen()
        assert proc.stdout is not None and proc.stderr is not None
        c.readers = [
            asyncio.create_task(self._pump(proc.stdout, c, STDOUT)),
            asyncio.create_task(self._pump(proc.stderr, c, STDERR)),
        ]
        reap = asyncio.create_task(self._reap(c, proc))
        self._reaping.add(reap)
        reap.add_done_callback(self._reaping.discard)
        if self.closing:  # the node began to close while this one was being created
            c.stop_requested = True
            self._signal(c, signal.SIGKILL)

    @staticmethod
    async def _pump(stream: asyncio.StreamReader, c: SimContainer, kind: int) -> None:
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line longer than the limit: take what is there
                line = await stream.read(1 << 20)
            if not line:
                return
            c.log.append(kind, line)

    async def _reap(self, c: SimContainer, proc: asyncio.subprocess.Process) -> None:
        returncode = await proc.wait()
        # Children left in the group (the container's "other processes") go with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*c.readers, return_exceptions=True), 2)
        c.exit_code = exit_code_of(returncode)
        c.status = "exited"
        c.pid = 0
        c.finished_ns = time.time_ns()
        c.log.close()
        c.exited.set()

    def _signal(self, c: SimContainer, sig: int) -> None:
        if c.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c.process.pid, sig)

    async def stop(self, c: SimContainer, timeout: float | None, sig: int | None = None) -> None:
        if not c.running:
            raise DockerError(304, "container already stopped")
        c.stop_requested = True
        stop_signal = sig or parse_signal(c.config.get("StopSignal") or "SIGTERM")
        self._signal(c, stop_signal)
        wait = 10.0 if timeout is None else timeout
        if wait < 0:  # -1: wait forever
            await c.exited.wait()
            return
        try:
            await asyncio.wait_for(c.exited.wait(), wait)
        except TimeoutError:
            self._signal(c, signal.SIGKILL)
            await c.exited.wait()

    async def kill(self, c: SimContainer, sig_name: str | None) -> None:
        if not c.running:
            raise DockerError(
                409, f"Cannot kill container: {c.id}: Container {c.id} is not running"
            )
        sig = parse_signal(sig_name or "SIGKILL")
        if sig == signal.SIGKILL:
            c.stop_requested = True
        self._signal(c, sig)
        if sig == signal.SIGKILL:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(c.exited.wait(), 5)

    async def remove(self, c: SimContainer, force: bool) -> None:
        if c.running:
            if not force:
                raise DockerError(
                    409,
                    f'cannot remove container "/{c.name}": container is running: stop the '
                    "container before removing or force remove",
                )
            c.stop_requested = True
            self._signal(c, signal.SIGKILL)
            await c.exited.wait()
        c.status = "removing"
        self.containers.pop(c.id, None)
        c.log.close()
        c.removed.set()
        log_dir = self.state_dir / "containers" / c.id
        shutil.rmtree(log_dir / "root", ignore_errors=True)  # what archives put there
        for path in log_dir.glob("*"):
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            log_dir.rmdir()

    async def wait(self, c: SimContainer, condition: str) -> int:
        if condition == "removed":
            await c.removed.wait()
        elif condition == "next-exit" or c.running:
            if condition == "next-exit" and not c.running:
                await _wait_started_then_exited(c)
            else:
                await c.exited.wait()
        return c.exit_code

    async def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Kill every container's process group, one being started too, and wait until
        each has been reaped (at most `timeout` s): nothing is left, and no subprocess
        transport outlives the node's event loop."""
        self.closing = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._starting or self._reaping:
            for c in self.containers.values():
                if c.running:
                    c.stop_requested = True
                    self._signal(c, signal.SIGKILL)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            await asyncio.wait({*self._starting, *self._reaping}, timeout=remaining)


async def _wait_started_then_exited(c: SimContainer) -> None:
    while not c.running:
        await asyncio.sleep(0.05)
    await c.exited.wait()


def parse_signal(value: str | int) -> int:
    """A signal by name ("SIGTERM", "TERM") or number, as Docker accepts it."""
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    name = str(value).upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return int(signal.Signals[name])
    except KeyError:
        raise DockerError(400, f"Invalid signal: {value}") from None

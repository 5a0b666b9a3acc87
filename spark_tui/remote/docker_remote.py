"""Docker on a node: the Docker SDK through the node's socket forwarded over its SSH connection.

The SDK is blocking, so every call runs in a thread of this module's pool; log streams
get a thread of their own that hands lines to the event loop. When the SSH connection
drops, the forward is re-created at the same local path and the call is tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import docker
import docker.errors
import requests.exceptions
from docker.types import DeviceRequest, Ulimit

from spark_tui.core.errors import OperationFailed, SparkError, UnreachableError
from spark_tui.core.facts import ContainerInfo, ImageInfo
from spark_tui.remote.ssh import NodeConnection, OutageReport

T = TypeVar("T")

# The threads Docker calls run in. A probe, launch or stop of N nodes makes N calls at once,
# each mostly waiting on its node: asyncio's default pool holds os.cpu_count() + 4 threads
# (6 on a 2-core machine), so beyond that the nodes' calls queued behind each other.
_CALLS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="docker-call")

# Errors that mean "the socket went away", usually because the SSH connection dropped.
_TRANSPORT_ERRORS = (
    requests.exceptions.ConnectionError,
    requests.exceptions.ChunkedEncodingError,
    ConnectionError,
    BrokenPipeError,
    FileNotFoundError,
)


def parse_timestamp_ns(stamp: str) -> int:
    """Docker's RFC 3339 (nano) log timestamp -> integer nanoseconds since the epoch."""
    stamp = stamp.strip()
    if stamp.endswith("Z"):
        stamp, offset = stamp[:-1], "+00:00"
    else:
        offset = stamp[-6:] if stamp[-6] in "+-" else "+00:00"
        stamp = stamp[:-6] if stamp[-6] in "+-" else stamp
    whole, _, frac = stamp.partition(".")
    seconds = datetime.fromisoformat(whole + offset).timestamp()
    nanos = int((frac + "000000000")[:9]) if frac else 0
    return int(seconds) * 1_000_000_000 + nanos


_SERVER_HEADER = re.compile(r"Docker/(\S+)")


def ping_versions(headers: Mapping[str, str]) -> dict[str, str]:
    """The engine's `Version` and `ApiVersion` (as /version names them) from the headers
    of its /_ping answer (`Server: Docker/29.1.3 (linux)`, `Api-Version: 1.52`)."""
    out = {}
    if api := headers.get("Api-Version"):
        out["ApiVersion"] = api
    if m := _SERVER_HEADER.match(headers.get("Server") or ""):
        out["Version"] = m.group(1)
    return out


@dataclass(frozen=True)
class LogRecord:
    """One log line from Docker: its timestamp (as printed and in ns) and its text."""

    stamp: str
    ts_ns: int
    text: str
    stream: str = "stdout"


def split_stamp(line: str) -> tuple[str, int, str]:
    """`2025-01-01T00:00:00.123456789Z text` -> (stamp, ns, text); (\"\", 0, line) without one."""
    stamp, sep, text = line.partition(" ")
    if sep and len(stamp) >= 20 and stamp[4] == "-" and "T" in stamp:
        try:
            return stamp, parse_timestamp_ns(stamp), text
        except ValueError:
            pass
    return "", 0, line


def _ulimits(spec: Mapping[str, str]) -> list[Ulimit]:
    out = []
    for name, value in spec.items():
        soft, _, hard = str(value).partition(":")
        out.append(Ulimit(name=name, soft=int(soft), hard=int(hard or soft)))
    return out


def create_kwargs(spec: Any, env: Mapping[str, str]) -> dict[str, Any]:
    """Docker SDK `containers.create` arguments for a core.plan.ContainerSpec.

    `env` is the spec's env with secrets already resolved: it must never be logged.
    """
    opts = spec.docker
    kwargs: dict[str, Any] = {
        "image": spec.image,
        "name": spec.name,
        "command": list(spec.command) or None,
        "labels": dict(spec.labels),
        "environment": dict(env),
        "volumes": {host: {"bind": target, "mode": "rw"} for host, target in spec.mounts.items()},
        "detach": True,
    }
    if spec.entrypoint is not None:
        kwargs["entrypoint"] = list(spec.entrypoint)
    if opts.privileged:
        kwargs["privileged"] = True
    if opts.gpus:
        count = -1 if opts.gpus == "all" else int(opts.gpus)
        kwargs["device_requests"] = [DeviceRequest(count=count, capabilities=[["gpu"]])]
    if opts.ipc:
        kwargs["ipc_mode"] = opts.ipc
    if opts.network:
        kwargs["network_mode"] = opts.network
    if opts.shm_size:
        kwargs["shm_size"] = opts.shm_size
    if opts.ulimits:
        kwargs["ulimits"] = _ulimits(opts.ulimits)
    return kwargs


def _container_info(raw: Mapping[str, Any]) -> ContainerInfo:
    names = raw.get("Names") or []
    return ContainerInfo(
        name=(names[0] if names else raw.get("Id", "")[:12]).lstrip("/"),
        id=str(raw.get("Id", ""))[:12] or None,
        state=str(raw.get("State") or "unknown"),
        image=raw.get("Image"),
        labels=dict(raw.get("Labels") or {}),
        command=str(raw["Command"]) if raw.get("Command") else None,
    )


def _image_infos(raw: Mapping[str, Any]) -> list[ImageInfo]:
    digests = list(raw.get("RepoDigests") or [])
    tags = [t for t in raw.get("RepoTags") or [] if t != "<none>:<none>"]
    infos = []
    for tag in tags or [None]:
        repo = tag.rsplit(":", 1)[0] if tag else None
        digest = next((d.split("@", 1)[1] for d in digests if d.split("@", 1)[0] == repo), None)
        if digest is None and digests:
            digest = digests[0].split("@", 1)[1]
        infos.append(
            ImageInfo(
                ref=tag or (digests[0] if digests else str(raw.get("Id"))),
                id=raw.get("Id"),
                digest=digest,
                size_bytes=raw.get("Size"),
            )
        )
    return infos


# Longest silence on a followed log before its stream is re-opened (see stream_logs).
STREAM_READ_TIMEOUT_S = 30.0


class LogStream:
    """A Docker log stream read by a thread; lines arrive on an asyncio queue.

    `records()` yields LogRecords until the stream ends (the container exited, or the
    connection dropped: the caller tells them apart). `close()` stops the reader.
    """

    _END = object()

    def __init__(self, raw: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._raw = raw
        self._loop = loop
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._read, daemon=True, name="docker-logs")
        self._thread.start()

    def _put(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _read(self) -> None:
        pending = b""
        try:
            for chunk in self._raw:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._put(line)
            if pending:
                self._put(pending)
        except Exception as exc:  # the socket went away: the follower resumes
            self.error = exc
        finally:
            self._put(self._END)

    async def records(self) -> Any:
        while True:
            item = await self._queue.get()
            if item is self._END:
                return
            stamp, ts_ns, text = split_stamp(item.decode("utf-8", errors="replace").rstrip("\r"))
            yield LogRecord(stamp=stamp, ts_ns=ts_ns, text=text)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._raw.close()


class RemoteDocker:
    """The Docker SDK on one node, through its socket forwarded over SSH (calls run in threads)."""

    def __init__(self, conn: NodeConnection, socket_path: str, timeout: float = 60.0) -> None:
        self.conn = conn
        self.node = conn.name
        self.socket_path = socket_path
        self.timeout = timeout
        self._client: docker.DockerClient | None = None
        self._api_version: str | None = None
        self.server_version: dict[str, Any] = {}
        self._stream_client: docker.DockerClient | None = None

    @classmethod
    async def open(cls, conn: NodeConnection, timeout: float = 60.0) -> RemoteDocker:
        """Forward the node's Docker socket and connect the SDK to it."""
        try:
            path = await conn.forward_docker_socket()
        except SparkError:
            raise
        except Exception as exc:
            raise OperationFailed(
                f"{conn.name}: cannot forward the Docker socket: {exc}",
                "check that Docker runs on the node and that your user may use it "
                "(`docker ps` over ssh; add the user to the docker group)",
            ) from exc
        remote = cls(conn, path, timeout)
        await remote._connect()
        return remote

    def _new_client(self, timeout: float | None) -> docker.DockerClient:
        base = f"unix://{self.socket_path}"
        if self._api_version is None:
            # Ask once which API the engine speaks (the lab's dockerd 20.10 speaks 1.41,
            # Docker 29 on a Spark refuses anything older than 1.44). /_ping says it in its
            # headers, with the engine's version, unversioned; /version would make the engine
            # run runc and docker-init for their versions (processes on the node each time).
            first = docker.DockerClient(base_url=base, version="1.24", timeout=timeout or 60)
            try:
                # The SDK's own calls carry its timeout; a bare get does not, and an
                # engine (or a forward) that accepts but never answers would hold this
                # thread, and the interpreter's exit that joins it, for ever.
                ping = first.api.get(f"{first.api.base_url}/_ping", timeout=timeout or 60)
                ping.raise_for_status()
                self.server_version = ping_versions(ping.headers)
            finally:
                first.close()
            self._api_version = str(self.server_version.get("ApiVersion") or "1.41")
        return docker.DockerClient(base_url=base, version=self._api_version, timeout=timeout)

    async def _connect(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            self._client = await loop.run_in_executor(_CALLS, self._new_client, self.timeout)
        except (
            docker.errors.DockerException,
            requests.exceptions.HTTPError,
            requests.exceptions.Timeout,
            *_TRANSPORT_ERRORS,
        ) as exc:
            raise OperationFailed(
                f"{self.node}: Docker does not answer through the forwarded socket: {_reason(exc)}",
                "check that dockerd runs on the node and your user may use its socket "
                "(`ssh NODE docker info`; add the user to the docker group)",
            ) from exc

    async def reconnect(self) -> None:
        """After a dropped SSH connection: reconnect it (with backoff) and the SDK."""
        await self.conn.ensure_connected()
        self._close_clients()
        await self._connect()

    async def reconnect_patiently(self, report: OutageReport | None = None) -> None:
        """After a dropped SSH connection: wait until it is back however long that takes
        (see NodeConnection.reconnect_patiently), then reconnect the SDK."""
        await self.conn.reconnect_patiently(report)
        self._close_clients()
        await self._connect()

    def _close_clients(self) -> None:
        for client in (self._client, self._stream_client):
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()
        self._client = self._stream_client = None

    async def close(self) -> None:
        self._close_clients()

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            raise UnreachableError(f"{self.node}: Docker is not connected", "open it first")
        return self._client

    async def call(self, fn: Callable[[docker.DockerClient], T], what: str) -> T:
        """Run a blocking SDK call in a thread; retried once after a reconnect."""
        for attempt in range(2):
            if self._client is None:
                await self.reconnect()
            try:
                return await asyncio.get_running_loop().run_in_executor(_CALLS, fn, self.client)
            except _TRANSPORT_ERRORS as exc:
                if attempt == 0:
                    await self.reconnect()
                    continue
                raise UnreachableError(
                    f"{self.node}: Docker went away during {what}: {exc}",
                    "check the SSH connection to the node and that dockerd runs",
                ) from exc
            except docker.errors.NotFound:
                raise
            except docker.errors.APIError as exc:
                raise OperationFailed(
                    f"{self.node}: docker {what} failed: {_reason(exc)}",
                    "see the message above; `docker` on the node shows the same",
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # --- facts ------------------------------------------------------------------------

    async def version(self) -> str:
        """The engine's version (as `docker version` prints it for the server)."""
        if not self.server_version.get("Version"):
            self.server_version = dict(await self.call(lambda c: c.version(), "version"))
        return str(self.server_version.get("Version") or "unknown")

    async def images(self) -> list[ImageInfo]:
        raw = await self.call(lambda c: c.api.images(), "image list")
        return [info for item in raw for info in _image_infos(item)]

    async def image(self, ref: str) -> ImageInfo | None:
        """The local image `ref` with its digest, or None when the node does not have it."""
        try:
            raw = await self.call(lambda c: c.api.inspect_image(ref), "image inspect")
        except docker.errors.NotFound:
            return None
        infos = _image_infos(raw)
        match = next((i for i in infos if i.ref == ref), infos[0] if infos else None)
        return ImageInfo(
            ref=ref,
            id=raw.get("Id"),
            digest=match.digest if match else None,
            size_bytes=raw.get("Size"),
        )

    async def pull(self, ref: str, progress: Callable[[str], None] | None = None) -> ImageInfo:
        """Pull `ref`, reporting progress lines; a clear error when no registry is reachable."""
        loop = asyncio.get_running_loop()

        def run(c: docker.DockerClient) -> None:
            last = ""
            for event in c.api.pull(ref, stream=True, decode=True):
                if "error" in event:
                    raise docker.errors.APIError(str(event["error"]))
                line = " ".join(str(event.get(k, "")) for k in ("id", "status", "progress"))
                line = " ".join(line.split())
                if progress is not None and line and line != last:
                    last = line
                    loop.call_soon_threadsafe(progress, line)

        try:
            await self.call(run, f"pull {ref}")
        except (OperationFailed, docker.errors.NotFound) as exc:
            detail = (
                exc.message.split(": ", 2)[-1] if isinstance(exc, OperationFailed) else _reason(exc)
            )
            raise OperationFailed(
                f"{self.node}: image {ref} is not on the node and could not be pulled ({detail})",
                f"pull it where a registry is reachable and copy it over: "
                f"`docker save {ref} | ssh {self.node} docker load`",
            ) from exc
        found = await self.image(ref)
        if found is None:
            raise OperationFailed(
                f"{self.node}: the pull of {ref} ended without the image",
                f"pull it by hand on the node: `docker pull {ref}`",
            )
        return found

    async def containers(
        self, labels: Iterable[str] | Mapping[str, str] = (), *, all: bool = True
    ) -> list[ContainerInfo]:
        """Containers carrying every label given (`key` or `key=value`)."""
        return [_container_info(r) for r in await self.containers_raw(labels, all=all)]

    async def containers_raw(
        self, labels: Iterable[str] | Mapping[str, str] = (), *, all: bool = True
    ) -> list[dict[str, Any]]:
        if isinstance(labels, Mapping):
            wanted = [f"{k}={v}" for k, v in labels.items()]
        else:
            wanted = list(labels)
        filters = {"label": wanted} if wanted else None
        return list(await self.call(lambda c: c.api.containers(all=all, filters=filters), "ps"))

    async def inspect(self, name: str) -> dict[str, Any] | None:
        """The container's inspect data, or None when it does not exist."""
        try:
            return dict(await self.call(lambda c: c.api.inspect_container(name), "inspect"))
        except docker.errors.NotFound:
            return None

    # --- lifecycle --------------------------------------------------------------------

    async def create(self, spec: Any, env: Mapping[str, str]) -> str:
        """Create a container from a ContainerSpec (env holds resolved secrets); returns its id.

        Docker's own create call alone: the SDK's `containers.create` inspects the new
        container after it, a second round trip over the node's SSH connection for nothing
        a launch reads."""
        kwargs = create_kwargs(spec, env)
        host_keys = ("privileged", "device_requests", "ipc_mode", "network_mode", "shm_size")

        def create(c: docker.DockerClient) -> dict[str, Any]:
            host = c.api.create_host_config(
                binds=kwargs["volumes"],
                ulimits=kwargs.get("ulimits"),
                **{k: kwargs[k] for k in host_keys if k in kwargs},
            )
            return dict(
                c.api.create_container(
                    kwargs["image"],
                    kwargs["command"],
                    name=kwargs["name"],
                    labels=kwargs["labels"],
                    environment=kwargs["environment"],
                    volumes=[v["bind"] for v in kwargs["volumes"].values()],
                    entrypoint=kwargs.get("entrypoint"),
                    detach=True,
                    host_config=host,
                )
            )

        created = await self.call(create, f"create {spec.name}")
        return str(created["Id"])

    async def start(self, name: str) -> None:
        await self.call(lambda c: c.api.start(name), f"start {name}")

    async def remove(self, name: str, *, stop_timeout: int = 10) -> bool:
        """Stop (SIGTERM, then SIGKILL after `stop_timeout` s) and remove; False if absent."""
        try:
            await self.call(lambda c: c.api.stop(name, timeout=stop_timeout), f"stop {name}")
        except docker.errors.NotFound:
            return False
        except OperationFailed:
            pass  # already stopped or being removed: the removal below decides
        try:
            await self.call(lambda c: c.api.remove_container(name, force=True), f"rm {name}")
        except docker.errors.NotFound:
            return False
        return True

    async def stop(self, name: str, *, timeout: int = 10) -> dict[str, Any] | None:
        """`docker stop`: SIGTERM, SIGKILL after `timeout` s; the container's State after it
        (None when there is no such container)."""
        try:
            await self.call(lambda c: c.api.stop(name, timeout=timeout), f"stop {name}")
        except docker.errors.NotFound:
            return None
        except OperationFailed:
            pass  # already stopped or being removed: the state below tells
        info = await self.inspect(name)
        return dict(info.get("State") or {}) if info is not None else None

    async def kill(self, name: str) -> None:
        await self.call(lambda c: c.api.kill(name), f"kill {name}")

    async def logs(
        self, name: str, *, tail: int | str = "all", since_ns: int | None = None
    ) -> list[LogRecord]:
        """The container's log so far (not following), with timestamps."""

        def fetch(c: docker.DockerClient) -> bytes:
            kw: dict[str, Any] = {"timestamps": True, "tail": tail}
            if since_ns:
                kw["since"] = since_seconds(since_ns)
            return bytes(c.api.logs(name, **kw))

        data = await self.call(fetch, f"logs {name}")
        out = []
        for raw in data.decode("utf-8", errors="replace").split("\n"):
            if raw:
                stamp, ts, text = split_stamp(raw.rstrip("\r"))
                out.append(LogRecord(stamp=stamp, ts_ns=ts, text=text))
        return out

    async def stream_logs(
        self, name: str, *, tail: int | str = "all", since_ns: int | None = None
    ) -> LogStream:
        """Follow the container's log (timestamped) from `since_ns`, or its last `tail` lines."""
        loop = asyncio.get_running_loop()

        def open_stream(c: docker.DockerClient) -> Any:
            kw: dict[str, Any] = {"stream": True, "follow": True, "timestamps": True, "tail": tail}
            if since_ns:
                kw["since"] = since_seconds(since_ns)
            # A quiet log is not an error: a read that times out ends this stream and the
            # follower re-opens it from the last timestamp (no line lost or repeated). The
            # timeout bounds every call on this client, so a node that stops answering
            # mid-request can never leave a thread blocked forever (and a process unable
            # to exit).
            if self._stream_client is None:
                self._stream_client = self._new_client(STREAM_READ_TIMEOUT_S)
            return self._stream_client.api.logs(name, **kw)

        raw = await self.call(open_stream, f"logs -f {name}")
        return LogStream(raw, loop)


def since_seconds(ts_ns: int) -> float:
    """Docker's `since` (float seconds) a little before ts_ns, so the boundary line comes
    again (and is deduplicated) instead of being lost to float rounding."""
    return max((ts_ns - 1_000_000) / 1e9, 1e-6)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, docker.errors.APIError) and exc.explanation:
        return str(exc.explanation)
    return str(exc)

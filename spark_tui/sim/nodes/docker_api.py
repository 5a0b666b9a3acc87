"""A Docker Engine API subset over a unix socket, enough for the unmodified Docker SDK.

Routes (with or without a `/vX.Y` prefix): `/_ping` (GET, HEAD), `/version`, `/info`,
`/images/json`, `/images/{name}/json`, `/images/create` (pull: only images the node has),
`/containers/create`, `/containers/json` (`all`, `filters`: label, name, id, status),
`/containers/{id}/json`, `start`, `stop`, `restart`, `kill`, `wait`, `logs` (stdout,
stderr, follow, timestamps, since, until, tail; the multiplexed stream), `archive` (PUT:
a tar extracted into the container's own folder, see SimDockerEngine.put_archive) and DELETE.
Everything here is simulated: no container runtime is involved.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from spark_tui.sim.nodes.container_logs import encode, parse_unix_ns, rfc3339_nano
from spark_tui.sim.nodes.docker_engine import (
    DockerError,
    SimContainer,
    SimDockerEngine,
    parse_signal,
)

SERVER_VERSION = "29.2.1"  # reference docker_info_gb10.txt
API_VERSION = "1.52"
MIN_API_VERSION = "1.24"
_VERSION_PREFIX = re.compile(r"^/v\d+\.\d+(?=/)")
_REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    304: "Not Modified",
    400: "Bad Request",
    404: "Not Found",
    409: "Conflict",
    500: "Internal Server Error",
}
_ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass
class Request:
    """One parsed HTTP request."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.arg(name)
        if value is None:
            return default
        return value.lower() in ("1", "true", "yes")

    def json(self) -> Any:
        if not self.body:
            return {}
        try:
            return json.loads(self.body)
        except json.JSONDecodeError as exc:
            raise DockerError(400, f"invalid JSON: {exc.msg}") from None


def _iso(ts_ns: int) -> str:
    return rfc3339_nano(ts_ns) if ts_ns else _ZERO_TIME


def _ago(ts_ns: int, now_ns: int) -> str:
    secs = max(0, (now_ns - ts_ns) // 1_000_000_000)
    if secs < 1:
        return "Less than a second"
    if secs < 60:
        return f"{secs} seconds"
    if secs < 3600:
        return f"{secs // 60} minutes"
    return f"{secs // 3600} hours"


class DockerApiServer:
    """Serves one node's `SimDockerEngine` on a unix socket (simulated Docker daemon).

    `info()` supplies the node-specific fields of `/info` (name, memory, CPUs).
    """

    def __init__(
        self, engine: SimDockerEngine, socket_path: Path, info: Callable[[], dict[str, Any]]
    ) -> None:
        self.engine = engine
        self.socket_path = socket_path
        self._info = info
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections_accepted = 0  # connections made to the socket, ever
        self.pings = 0  # /_ping requests (a Docker client asks one when it opens)

    async def start(self) -> None:
        self.socket_path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()  # a handler waiting for the next request sees EOF
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        self.socket_path.unlink(missing_ok=True)

    # ---- HTTP plumbing ----------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self.connections_accepted += 1
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    break
                keep = await self._dispatch(request, reader, writer)
                if not keep or request.headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            # The server is closing: end quietly (a cancelled connection task gets logged).
            pass
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        body = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(parts)
        elif headers.get("content-length"):
            body = await reader.readexactly(int(headers["content-length"]))
        url = urlsplit(target)
        path = _VERSION_PREFIX.sub("", unquote(url.path))
        return Request(method.upper(), path, parse_qs(url.query), headers, body)

    @staticmethod
    def _head(status: int, headers: dict[str, str]) -> bytes:
        base = {
            "Api-Version": API_VERSION,
            "Docker-Experimental": "false",
            "Ostype": "linux",
            "Server": f"Docker/{SERVER_VERSION} (linux)",
            "Date": datetime.now(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT"),
        }
        base.update(headers)
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}"]
        lines += [f"{k}: {v}" for k, v in base.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes = b"",
        content_type: str = "application/json",
        head_only: bool = False,
        extra: dict[str, str] | None = None,
    ) -> None:
        headers = dict(extra or {})
        if status not in (204, 304):
            headers["Content-Type"] = content_type
            headers["Content-Length"] = str(len(body))
        writer.write(self._head(status, headers))
        if body and not head_only and status not in (204, 304):
            writer.write(body)
        await writer.drain()

    async def _json(self, writer: asyncio.StreamWriter, status: int, data: Any) -> None:
        await self._send(writer, status, (json.dumps(data) + "\n").encode())

    # ---- routing ----------------------------------------------------------------------

    async def _dispatch(
        self, req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; False when the connection must close afterwards."""
        try:
            return await self._route(req, reader, writer)
        except DockerError as exc:
            if exc.status == 304:
                await self._send(writer, 304)
            else:
                await self._json(writer, exc.status, {"message": exc.message})
            return True

    async def _route(
        self, req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        m, p, e = req.method, req.path, self.engine
        if p == "/_ping" and m in ("GET", "HEAD"):
            self.pings += 1
            extra = {
                "Cache-Control": "no-cache, no-store, must-revalidate",
                "Pragma": "no-cache",
                "Builder-Version": "2",
                "Swarm": "inactive",
            }
            await self._send(writer, 200, b"OK", "text/plain; charset=utf-8", m == "HEAD", extra)
            return True
        if p == "/version" and m == "GET":
            await self._json(writer, 200, self.version())
            return True
        if p == "/info" and m == "GET":
            await self._json(writer, 200, self.info())
            return True
        if p == "/images/json" and m == "GET":
            await self._json(writer, 200, self.images_list(req))
            return True
        if p == "/images/create" and m == "POST":
            return await self._pull(req, writer)
        match = re.fullmatch(r"/images/(.+)/json", p)
        if match and m == "GET":
            await self._json(writer, 200, self.image_inspect(e.get_image(match.group(1))))
            return True
        if p == "/containers/create" and m == "POST":
            c = e.create(req.json(), req.arg("name"))
            await self._json(writer, 201, {"Id": c.id, "Warnings": []})
            return True
        if p == "/containers/json" and m == "GET":
            await self._json(writer, 200, self.containers_list(req))
            return True
        match = re.fullmatch(r"/containers/([^/]+)(?:/([a-z]+))?", p)
        if match:
            c = e.get_container(match.group(1))
            action = match.group(2)
            return await self._container(req, c, action, reader, writer)
        raise DockerError(404, "page not found")

    async def _container(
        self,
        req: Request,
        c: SimContainer,
        action: str | None,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        m, e = req.method, self.engine
        if action is None and m == "DELETE":
            await e.remove(c, req.flag("force"))
            await self._send(writer, 204)
        elif action == "json" and m == "GET":
            await self._json(writer, 200, self.container_inspect(c))
        elif action == "start" and m == "POST":
            await e.start(c)
            await self._send(writer, 204)
        elif action == "stop" and m == "POST":
            t = req.arg("t") or req.arg("timeout")
            sig = req.arg("signal")
            await e.stop(c, float(t) if t is not None else None, _sig(sig))
            await self._send(writer, 204)
        elif action == "restart" and m == "POST":
            t = req.arg("t") or req.arg("timeout")
            if c.running:
                await e.stop(c, float(t) if t is not None else None)
            await e.start(c)
            await self._send(writer, 204)
        elif action == "kill" and m == "POST":
            await e.kill(c, req.arg("signal"))
            await self._send(writer, 204)
        elif action == "wait" and m == "POST":
            code = await e.wait(c, req.arg("condition") or "not-running")
            await self._json(writer, 200, {"Error": None, "StatusCode": code})
        elif action == "logs" and m == "GET":
            return await self._logs(req, c, reader, writer)
        elif action == "archive" and m == "PUT":
            e.put_archive(c, req.arg("path") or "", req.body)
            await self._send(writer, 200)
        else:
            raise DockerError(404, "page not found")
        return True

    async def _pull(self, req: Request, writer: asyncio.StreamWriter) -> bool:
        name = req.arg("fromImage") or ""
        tag = req.arg("tag")
        ref = (
            name
            if not tag or "@" in name
            else (f"{name}@{tag}" if tag.startswith("sha256:") else f"{name}:{tag}")
        )
        image = self.engine.find_image(ref)
        if image is None:
            repo = name.split("@")[0]
            raise DockerError(
                404,
                f"pull access denied for {repo}, repository does not exist or may require "
                "'docker login': denied: requested access to the resource is denied "
                "(simulated node: no registry)",
            )
        lines = [
            {"status": f"Pulling from {image.repo}", "id": image.tag or "latest"},
            {"status": f"Digest: {image.digest}"},
            {"status": f"Status: Image is up to date for {ref}"},
        ]
        # A pull answers with a chunked stream of JSON messages (the SDK relies on chunking).
        writer.write(
            self._head(200, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        )
        for line in lines:
            data = (json.dumps(line) + "\r\n").encode()
            writer.write(b"%x\r\n" % len(data) + data + b"\r\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _logs(
        self,
        req: Request,
        c: SimContainer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        want = set()
        if req.flag("stdout"):
            want.add(1)
        if req.flag("stderr"):
            want.add(2)
        if not want:
            raise DockerError(400, "Bad parameters: you must choose at least one stream")
        timestamps = req.flag("timestamps")
        follow = req.flag("follow")
        tail_arg = req.arg("tail") or "all"
        tail = None if tail_arg == "all" else max(0, int(tail_arg))
        try:
            since = parse_unix_ns(req.arg("since") or "0") or None
            until = parse_unix_ns(req.arg("until") or "0") or None
        except ValueError as exc:
            raise DockerError(400, str(exc)) from None
        multiplexed = not c.config.get("Tty")
        headers = {
            "Content-Type": (
                "application/vnd.docker.multiplexed-stream"
                if multiplexed
                else "application/vnd.docker.raw-stream"
            ),
            "Transfer-Encoding": "chunked",
        }
        writer.write(self._head(200, headers))
        log = c.log
        index = log.start_index(tail)

        async def flush() -> None:
            nonlocal index
            chunk = bytearray()
            while index < len(log.entries):
                entry = log.entries[index]
                index += 1
                if entry.stream in want and log.wanted(entry, since, until):
                    chunk += encode(entry, timestamps, multiplexed)
            if chunk:
                writer.write(b"%x\r\n" % len(chunk) + bytes(chunk) + b"\r\n")
                await writer.drain()

        await flush()
        if follow:
            # Stop following when the client goes away, not only when the log ends.
            gone = asyncio.create_task(reader.read(1))
            try:
                while not log.closed and not gone.done():
                    waiter = asyncio.create_task(log.wait_beyond(index))
                    await asyncio.wait({waiter, gone}, return_when=asyncio.FIRST_COMPLETED)
                    waiter.cancel()
                    if until is not None and until < time.time_ns():
                        break
                    await flush()
                await flush()
            finally:
                client_left = gone.done()
                gone.cancel()
                # The reader must be free before the next request. asyncio.wait() does not
                # swallow a cancellation of this task (suppressing CancelledError here did,
                # and the server's close() then waited forever).
                await asyncio.wait({gone})
                if not gone.cancelled():
                    gone.exception()  # a reset connection is just a client that left
            if client_left:
                return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    # ---- documents --------------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        return {
            "Platform": {"Name": "Docker Engine - Community"},
            "Components": [
                {
                    "Name": "Engine",
                    "Version": SERVER_VERSION,
                    "Details": {"ApiVersion": API_VERSION, "Arch": "arm64", "Os": "linux"},
                },
            ],
            "Version": SERVER_VERSION,
            "ApiVersion": API_VERSION,
            "MinAPIVersion": MIN_API_VERSION,
            "GitCommit": "a5c7197",
            "GoVersion": "go1.25.6",
            "Os": "linux",
            "Arch": "arm64",
            "KernelVersion": "6.11.0-1016-nvidia",
            "BuildTime": "2026-01-20T12:00:00.000000000+00:00",
        }

    def info(self) -> dict[str, Any]:
        cs = list(self.engine.containers.values())
        running = sum(1 for c in cs if c.running)
        data: dict[str, Any] = {
            "ID": "",
            "Containers": len(cs),
            "ContainersRunning": running,
            "ContainersPaused": 0,
            "ContainersStopped": len(cs) - running,
            "Images": len(self.engine.images),
            "Driver": "overlay2",
            "DriverStatus": [
                ["Backing Filesystem", "extfs"],
                ["Supports d_type", "true"],
                ["Using metacopy", "false"],
                ["Native Overlay Diff", "true"],
                ["userxattr", "false"],
            ],
            "Plugins": {
                "Volume": ["local"],
                "Network": ["bridge", "host", "ipvlan", "macvlan", "null", "overlay"],
                "Log": [
                    "awslogs",
                    "fluentd",
                    "gcplogs",
                    "gelf",
                    "journald",
                    "json-file",
                    "local",
                    "splunk",
                    "syslog",
                ],
            },
            "LoggingDriver": "json-file",
            "CgroupDriver": "systemd",
            "CgroupVersion": "2",
            "KernelVersion": "6.11.0-1016-nvidia",
            "OperatingSystem": "Ubuntu 24.04.3 LTS (simulated DGX Spark)",
            "OSVersion": "24.04",
            "OSType": "linux",
            "Architecture": "aarch64",
            "NCPU": 20,
            "DockerRootDir": "/var/lib/docker",
            "ServerVersion": SERVER_VERSION,
            "Runtimes": {
                "io.containerd.runc.v2": {"path": "runc", "status": {}},
                "runc": {"path": "runc", "status": {}},
                "nvidia": {"path": "nvidia-container-runtime", "status": {}},
            },
            "DefaultRuntime": "runc",
            "Swarm": {"LocalNodeState": "inactive"},
            "InitBinary": "docker-init",
            "ContainerdCommit": {"ID": "dea7da592f5d1d2b7755e3a161be07f43fad8f75"},
            "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"],
            "Labels": ["spark-tui.simulated=true"],
        }
        data.update(self._info())
        return data

    def images_list(self, req: Request) -> list[dict[str, Any]]:
        filters = _filters(req.arg("filters"))
        refs = filters.get("reference", [])
        out = []
        for image in self.engine.images:
            if refs and not any(_ref_glob(r, image) for r in refs):
                continue
            out.append(
                {
                    "Id": image.id,
                    "ParentId": "",
                    "RepoTags": image.repo_tags,
                    "RepoDigests": image.repo_digests,
                    "Created": image.created,
                    "Size": image.size,
                    "SharedSize": -1,
                    "Labels": image.labels,
                    "Containers": -1,
                }
            )
        return out

    def image_inspect(self, image: Any) -> dict[str, Any]:
        return {
            "Id": image.id,
            "RepoTags": image.repo_tags,
            "RepoDigests": image.repo_digests,
            "Parent": "",
            "Comment": "simulated image (spark-tui sim)",
            "Created": datetime.fromtimestamp(image.created, UTC).strftime(
                "%Y-%m-%dT%H:%M:%S.000000000Z"
            ),
            "DockerVersion": "",
            "Author": "",
            "Config": {
                "Env": image.env,
                "Cmd": ["/bin/bash"],
                "Entrypoint": None,
                "WorkingDir": "",
                "Labels": image.labels,
            },
            "Architecture": "arm64",
            "Os": "linux",
            "Size": image.size,
            "GraphDriver": {"Name": "overlay2", "Data": None},
            "RootFS": {"Type": "layers", "Layers": [image.id]},
            "Metadata": {"LastTagTime": _ZERO_TIME},
        }

    def container_inspect(self, c: SimContainer) -> dict[str, Any]:
        state = {
            "Status": c.status,
            "Running": c.running,
            "Paused": False,
            "Restarting": False,
            "OOMKilled": False,
            "Dead": False,
            "Pid": c.pid,
            "ExitCode": c.exit_code,
            "Error": c.error,
            "StartedAt": _iso(c.started_ns),
            "FinishedAt": _iso(c.finished_ns),
        }
        host_config = {"NetworkMode": "default", "Runtime": "runc"}
        host_config.update(c.host_config)
        mounts = []
        for bind in host_config.get("Binds") or []:
            parts = bind.split(":")
            if len(parts) >= 2:
                mounts.append(
                    {
                        "Type": "bind",
                        "Source": parts[0],
                        "Destination": parts[1],
                        "Mode": parts[2] if len(parts) > 2 else "",
                        "RW": not (len(parts) > 2 and "ro" in parts[2].split(",")),
                        "Propagation": "rprivate",
                    }
                )
        network = host_config.get("NetworkMode") or "default"
        return {
            "Id": c.id,
            "Created": rfc3339_nano(c.created_ns),
            "Path": c.argv[0] if c.argv else "",
            "Args": c.argv[1:],
            "State": state,
            "Image": c.image.id,
            "ResolvConfPath": "",
            "HostnamePath": "",
            "HostsPath": "",
            "LogPath": str(c.log.path or ""),
            "Name": "/" + c.name,
            "RestartCount": 0,
            "Driver": "overlay2",
            "Platform": "linux",
            "MountLabel": "",
            "ProcessLabel": "",
            "AppArmorProfile": "",
            "HostConfig": host_config,
            "Mounts": mounts,
            "Config": c.config,
            "NetworkSettings": {
                "Networks": {network: {"NetworkID": "", "IPAddress": ""}},
                "Ports": {},
            },
        }

    def containers_list(self, req: Request) -> list[dict[str, Any]]:
        filters = _filters(req.arg("filters"))
        show_all = req.flag("all")
        now = time.time_ns()
        out = []
        for c in sorted(self.engine.containers.values(), key=lambda c: -c.created_ns):
            if not show_all and not c.running and "status" not in filters:
                continue
            if not _container_matches(c, filters):
                continue
            if c.running:
                status = f"Up {_ago(c.started_ns, now)}"
            elif c.status == "exited":
                status = f"Exited ({c.exit_code}) {_ago(c.finished_ns, now)} ago"
            else:
                status = "Created"
            out.append(
                {
                    "Id": c.id,
                    "Names": ["/" + c.name],
                    "Image": c.image_ref,
                    "ImageID": c.image.id,
                    "Command": " ".join(c.argv),
                    "Created": c.created_ns // 1_000_000_000,
                    "Ports": [],
                    "Labels": c.labels,
                    "State": c.status,
                    "Status": status,
                    "HostConfig": {"NetworkMode": c.host_config.get("NetworkMode") or "default"},
                    "NetworkSettings": {"Networks": {}},
                    "Mounts": [],
                }
            )
        return out


def _sig(value: str | None) -> int | None:
    return parse_signal(value) if value else None


def _filters(raw: str | None) -> dict[str, list[str]]:
    """Docker's filters JSON: {"label": ["k=v"]} or the older {"label": {"k=v": true}}."""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        raise DockerError(400, f"invalid filter {raw!r}") from None
    out: dict[str, list[str]] = {}
    for key, value in (data or {}).items():
        if isinstance(value, dict):
            out[key] = [k for k, v in value.items() if v]
        elif isinstance(value, list):
            out[key] = [str(v) for v in value]
        else:
            out[key] = [str(value)]
    return out


def _container_matches(c: SimContainer, filters: dict[str, list[str]]) -> bool:
    labels = c.labels
    for want in filters.get("label", []):
        key, sep, value = want.partition("=")
        if key not in labels or (sep and labels[key] != value):
            return False
    names = filters.get("name", [])
    if names and not any(re.search(n.lstrip("/"), c.name) for n in names):
        return False
    ids = filters.get("id", [])
    if ids and not any(c.id.startswith(i) for i in ids):
        return False
    statuses = filters.get("status", [])
    return not statuses or c.status in statuses


def _ref_glob(pattern: str, image: Any) -> bool:
    if image.matches(pattern):
        return True
    return any(
        fnmatch.fnmatch(tag, pattern) or fnmatch.fnmatch(tag.rsplit(":", 1)[0], pattern)
        for tag in image.repo_tags
    )

"""SSH to the nodes: one reused asyncssh connection per node, opened in parallel.

`NodeConnection` honours `~/.ssh/config` (HostName, User, Port, IdentityFile, ProxyJump,
UserKnownHostsFile), the agent and default keys; an inventory's port, user, identity_file
and known_hosts override them. Host keys go through `hostkeys.HostKeyPolicy`. Every call
has a timeout; the connection sends keepalives and is re-opened with backoff when it
drops, re-creating its port and socket forwards at the same local addresses so that
clients holding them (the Docker SDK, an HTTP client) carry on.

`ensure_connected` gives up after a few attempts (a command the user waits for fails fast,
naming the node); `reconnect_patiently` never does: what watches a running cluster waits
out an outage of any length, reporting it as an `Outage` on every failed attempt.

Commands are the fixed strings of `probe_commands` or `shlex.join(argv)`: `run_argv`
quotes every value, so no user value reaches a remote shell unquoted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import asyncssh

from spark_tui.core.errors import SparkError, UnreachableError
from spark_tui.core.inventory import InventoryNode
from spark_tui.remote import probe_commands
from spark_tui.remote.hostkeys import (
    DEFAULT_KNOWN_HOSTS,
    HostKeyConfirm,
    HostKeyError,
    HostKeyPolicy,
    RecordingClient,
    existing,
)

log = logging.getLogger(__name__)

DEFAULT_DOCKER_SOCKET = "/var/run/docker.sock"
GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
PREFERRED_CIPHERS = [
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
]
_DEFAULT_CIPHERS: list[bytes] | None = None
# `ssh_config=DEFAULT_CONFIG` means asyncssh's default: ~/.ssh/config when it exists.
DEFAULT_CONFIG: tuple[()] = ()


@dataclass
class RunResult:
    """What a remote command printed and how it ended (`exit_status` None: killed by a signal)."""

    stdout: str
    stderr: str
    exit_status: int | None

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class CommandTimeout(UnreachableError):
    """A remote command that did not finish within its timeout."""


@dataclass
class _Forward:
    """A forward to re-create after a reconnect, at the same local address."""

    kind: str  # "port" | "path"
    listen: str | int  # local port, or local socket path
    dest_host: str
    dest_port: int
    dest_path: str
    listener: Any = None


@dataclass
class Outage:
    """A node's dropped connection that is being re-opened: since when, how often tried,
    the last reason (with its remedy), and the pause before the next attempt."""

    node: str
    started: float = field(default_factory=time.monotonic)  # time.monotonic()
    attempts: int = 0
    reason: str = ""
    remedy: str = ""
    retry_in: float = 0.0
    ended: float | None = None

    @property
    def seconds(self) -> float:
        """How long the node has been unreachable (until it came back, once it has)."""
        return (self.ended if self.ended is not None else time.monotonic()) - self.started


OutageReport = Callable[[Outage], None]


def _short(cmd: str, limit: int = 60) -> str:
    return cmd if len(cmd) <= limit else cmd[: limit - 3] + "..."


class NodeConnection:
    """One node's SSH connection: reused, verified, kept alive and re-opened with backoff."""

    def __init__(
        self,
        node: InventoryNode,
        *,
        confirm: HostKeyConfirm | None = None,
        accept_new_host_keys: bool = False,
        ssh_config: Sequence[str] | None | tuple[()] = DEFAULT_CONFIG,
        connect_timeout: float = 10.0,
        command_timeout: float = 60.0,
        keepalive_interval: float = 15.0,
        keepalive_count_max: int = 3,
        reconnect_attempts: int = 5,
        backoff_initial: float = 0.2,
        backoff_max: float = 5.0,
        max_sessions: int = 8,
    ) -> None:
        self.node = node
        self.name = node.name
        self.confirm = confirm
        self.accept_new_host_keys = accept_new_host_keys
        self.ssh_config = ssh_config
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.keepalive_interval = keepalive_interval
        self.keepalive_count_max = keepalive_count_max
        self.reconnect_attempts = reconnect_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._conn: asyncssh.SSHClientConnection | None = None
        self._client: RecordingClient | None = None
        self._tunnels: list[asyncssh.SSHClientConnection] = []
        self._lock = asyncio.Lock()
        # OpenSSH refuses more than MaxSessions (10) sessions per connection: stay below.
        self._sessions = asyncio.Semaphore(max_sessions)
        self._forwards: list[_Forward] = []
        self._forward_dir: str | None = None
        self._policy: HostKeyPolicy | None = None
        self._ciphers: dict[str, Any] = {}
        self._closed = False
        # Filled from the resolved options on first connect.
        self.address: str = node.host
        self.port: int = node.port or 22
        self.username: str | None = node.user
        self.reconnects = 0
        self._docker_socket: str | None = None
        self._docker_host: str | None = None  # as a probe read it
        # Set while a dropped connection is being re-opened (see reconnect_patiently).
        self.outage: Outage | None = None

    # --- connecting -------------------------------------------------------------------

    def _kwargs(self, host: str | None = None) -> dict[str, Any]:
        """asyncssh options: the inventory's values override ~/.ssh/config's."""
        kw: dict[str, Any] = {
            "config": self.ssh_config,
            "keepalive_interval": self.keepalive_interval,
            "keepalive_count_max": self.keepalive_count_max,
            "connect_timeout": self.connect_timeout,
            "login_timeout": self.connect_timeout,
        }
        if host is None:
            if self.node.port:
                kw["port"] = self.node.port
            if self.node.user:
                kw["username"] = self.node.user
            if self.node.identity_file:
                kw["client_keys"] = [os.path.expanduser(self.node.identity_file)]
        return kw

    async def _resolve_policy(self) -> HostKeyPolicy:
        """Which known_hosts files to read and write, from the inventory or ~/.ssh/config."""
        if self._policy is not None:
            return self._policy
        if self.node.known_hosts:
            files = [self.node.known_hosts]
        else:
            opts = await self._options(self.node.host)
            configured = opts.known_hosts
            user_files = [str(f) for f in configured] if isinstance(configured, list) else []
            files = (user_files or [DEFAULT_KNOWN_HOSTS]) + [GLOBAL_KNOWN_HOSTS]
        self._policy = HostKeyPolicy(
            files,
            confirm=self.confirm,
            accept_new=self.accept_new_host_keys,
            write_to=files[0],
        )
        return self._policy

    async def _options(self, host: str) -> asyncssh.SSHClientConnectionOptions:
        """The node's connection options as asyncssh resolves them (config + inventory)."""
        kw = self._kwargs()
        try:
            opts = await asyncssh.SSHClientConnectionOptions.construct(None, host=host, **kw)
        except (OSError, ValueError, asyncssh.Error) as exc:
            raise self._unreachable(exc) from exc
        return cast(asyncssh.SSHClientConnectionOptions, opts)

    @staticmethod
    async def _default_ciphers() -> list[bytes]:
        global _DEFAULT_CIPHERS
        if _DEFAULT_CIPHERS is None:
            opts = await asyncssh.SSHClientConnectionOptions.construct(None, config=None, host="")
            _DEFAULT_CIPHERS = list(opts.encryption_algs)
        return _DEFAULT_CIPHERS

    def _known_hosts_arg(self, policy: HostKeyPolicy) -> asyncssh.SSHKnownHosts:
        """The known_hosts content asyncssh checks against (never None: that would trust all)."""
        files = existing(policy.known_hosts)
        if not files:
            return asyncssh.import_known_hosts("")
        return asyncssh.read_known_hosts(files)

    async def _connect_one(
        self, host: str, tunnel: Any, own: bool, extra: dict[str, Any] | None = None
    ) -> tuple[asyncssh.SSHClientConnection, RecordingClient]:
        """One connection, with the unknown-key flow (ask, append, connect again)."""
        policy = await self._resolve_policy()
        for attempt in range(2):
            client = RecordingClient()
            kw = {**self._kwargs(None if own else host), **self._ciphers, **(extra or {})}
            if tunnel is not None:
                kw["tunnel"] = tunnel
            try:
                conn = await asyncssh.connect(
                    host,
                    known_hosts=self._known_hosts_arg(policy),
                    client_factory=lambda c=client: c,
                    **kw,
                )
                return conn, client
            except asyncssh.HostKeyNotVerifiable as exc:
                if client.presented is None or attempt == 1:
                    raise HostKeyError(
                        f"{self.name}: the host key of {host} could not be verified ({exc.reason})",
                        "check the node's key with `ssh-keygen -lf` on the node and "
                        "its entry in known_hosts",
                    ) from exc
                await policy.resolve(self.name, client.presented)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _open(self) -> None:
        if self._conn is not None:  # a dropped connection: release it before a new one
            self._conn.abort()
            self._conn = None
        for t in self._tunnels:
            t.abort()
        opts = await self._options(self.node.host)
        self.address = str(opts.host)
        self.port = int(opts.port)
        # AES-GCM first when ~/.ssh/config does not choose the ciphers: it is what OpenSSH
        # also offers, and in asyncssh it costs a fraction of ChaCha20-Poly1305's CPU.
        default = await self._default_ciphers()
        self._ciphers = (
            {"encryption_algs": PREFERRED_CIPHERS} if opts.encryption_algs == default else {}
        )
        self.username = str(opts.username)
        tunnel: Any = None
        jumps = opts.tunnel if isinstance(opts.tunnel, str) else None
        # ProxyJump hosts are connected here (not by asyncssh) so that their keys get the
        # same verification and the same unknown-key confirmation as the node's own.
        self._tunnels = []
        if jumps:
            for hop in [h.strip() for h in jumps.split(",") if h.strip()]:
                user, _, hostport = hop.rpartition("@")
                host, _, port = hostport.partition(":")
                extra: dict[str, Any] = {}
                if user:
                    extra["username"] = user
                if port.isdigit():
                    extra["port"] = int(port)
                conn, _client = await self._connect_one(host, tunnel, own=False, extra=extra)
                self._tunnels.append(conn)
                tunnel = conn
        try:
            self._conn, self._client = await self._connect_one(self.node.host, tunnel, own=True)
        except BaseException:
            for t in self._tunnels:
                t.close()
            self._tunnels = []
            raise

    def _unreachable(self, exc: BaseException) -> SparkError:
        """A connection failure as a message naming the node, with a remedy."""
        if isinstance(exc, SparkError):
            return exc
        user = f"{self.username}@" if self.username else ""
        where = f"{self.name} ({user}{self.address}:{self.port})"
        if isinstance(exc, asyncssh.PermissionDenied):
            return UnreachableError(
                f"{where}: authentication refused ({exc.reason})",
                "check the user and key: `ssh-copy-id` your public key to the node, load it "
                "with `ssh-add`, or set identity_file in the inventory",
            )
        if isinstance(exc, ConnectionRefusedError):
            return UnreachableError(
                f"{where}: connection refused",
                "check that sshd runs on the node and listens on that port",
            )
        if isinstance(exc, socket.gaierror):
            return UnreachableError(
                f"{where}: the name does not resolve ({exc.strerror})",
                "check the host name, or its HostName in ~/.ssh/config",
            )
        if isinstance(exc, asyncio.TimeoutError | TimeoutError):
            return UnreachableError(
                f"{where}: no answer within {self.connect_timeout:g} s",
                "check that the node is powered on and reachable (ping its address) and that "
                "the inventory (or ~/.ssh/config) gives the right address and port",
            )
        if isinstance(exc, FileNotFoundError) and exc.filename:
            return UnreachableError(
                f"{where}: the key file {exc.filename} does not exist",
                "fix identity_file in the inventory (or IdentityFile in ~/.ssh/config)",
            )
        if isinstance(exc, OSError):
            return UnreachableError(
                f"{where}: {exc.strerror or exc}",
                "check the network path to the node and that sshd runs there",
            )
        if isinstance(exc, asyncssh.DisconnectError):
            return UnreachableError(
                f"{where}: the node closed the connection ({exc.reason})",
                "check sshd's log on the node (MaxStartups, AllowUsers, key options)",
            )
        return UnreachableError(f"{where}: {exc}", "check that `ssh` to the node works")

    @property
    def connected(self) -> bool:
        return (
            self._conn is not None
            and self._client is not None
            and not self._client.lost
            and not self._conn.is_closed()
        )

    @property
    def closed(self) -> bool:
        """True once `close()` was called (nothing reconnects it then)."""
        return self._closed

    @property
    def connection(self) -> asyncssh.SSHClientConnection:
        """The live asyncssh connection (call `ensure_connected` first)."""
        if self._conn is None:
            raise UnreachableError(f"{self.name}: not connected", "connect first")
        return self._conn

    async def connect(self) -> None:
        """Open the connection (once); raises UnreachableError/HostKeyError with the reason."""
        async with self._lock:
            if self.connected:
                return
            self._closed = False
            try:
                await self._open()
            except (SparkError, asyncio.CancelledError):
                raise
            except (TimeoutError, OSError, asyncssh.Error, ValueError) as exc:
                raise self._unreachable(exc) from exc
            if self._forwards:  # connected again after a drop: the forwards come back too
                self.reconnects += 1
                await self._restore_forwards()

    async def _reopen_once(self) -> SparkError | None:
        """One attempt to re-open a dropped connection (and its forwards): None once
        connected, else the reason. A changed host key is raised: it stays refused."""
        async with self._lock:
            if self.connected:
                return None
            if self._closed:
                raise UnreachableError(f"{self.name}: connection closed", "open the pool again")
            try:
                await self._open()
            except HostKeyError:
                raise
            except SparkError as exc:
                return exc
            except (TimeoutError, OSError, asyncssh.Error, ValueError) as exc:
                return self._unreachable(exc)
            self.reconnects += 1
            await self._restore_forwards()
            return None

    async def ensure_connected(self) -> None:
        """Reconnect with exponential backoff if the connection dropped; restore forwards.
        Gives up after `reconnect_attempts` (UnreachableError naming the node and why)."""
        if self.connected:
            return
        delay = self.backoff_initial
        last: SparkError | None = None
        attempts = max(1, self.reconnect_attempts)
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
            last = await self._reopen_once()
            if last is None:
                log.info("%s: reconnected (attempt %d)", self.name, attempt + 1)
                self.outage = None
                return
        assert last is not None
        raise UnreachableError(
            f"{last.message} (after {attempts} attempts to reconnect)",
            last.remedy,
        )

    async def reconnect_patiently(
        self, report: OutageReport | None = None, *, backoff_max: float | None = None
    ) -> Outage | None:
        """Re-open a dropped connection however long it takes (capped exponential backoff),
        calling `report` after every failed attempt; cancel the caller to stop trying.
        Returns the outage that ended (None when the connection was up), or raises
        HostKeyError (a changed key) or UnreachableError once the pool is closed."""
        if self.connected:
            return None
        cap = self.backoff_max if backoff_max is None else backoff_max
        delay = self.backoff_initial
        while True:
            failure = await self._reopen_once()
            outage = self.outage
            if failure is None:
                if outage is None:
                    return None  # someone else's attempt got there first, at once
                outage.ended = time.monotonic()
                self.outage = None
                log.info("%s: reachable again after %.1f s", self.name, outage.seconds)
                return outage
            if outage is None:
                outage = self.outage = Outage(self.name)
            outage.attempts += 1
            outage.reason, outage.remedy = failure.message, failure.remedy
            outage.retry_in = delay
            if report is not None:
                report(outage)
            await asyncio.sleep(delay)
            delay = min(delay * 2, cap)

    async def close(self) -> None:
        """Close forwards, the connection and its tunnels; remove the local socket folder."""
        self._closed = True
        for fwd in self._forwards:
            if fwd.listener is not None:
                fwd.listener.close()
        self._forwards = []
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.wait_closed(), 2)
        for t in reversed(self._tunnels):
            t.close()
        self._tunnels = []
        self._conn = None
        if self._forward_dir:
            shutil.rmtree(self._forward_dir, ignore_errors=True)
            self._forward_dir = None

    # --- commands ---------------------------------------------------------------------

    async def run(self, cmd: str, timeout: float | None = None, *, retry: bool = True) -> RunResult:
        """Run a fixed command string (at most `max_sessions` at once on this connection);
        when the connection drops under it, reconnect and run it once more if `retry`."""
        limit = timeout if timeout is not None else self.command_timeout
        for attempt in range(2):
            await self.ensure_connected()
            conn = self.connection
            async with self._sessions:
                proc = None
                try:
                    proc = await conn.create_process(cmd, encoding="utf-8", errors="replace")
                    result = await asyncio.wait_for(proc.wait(), limit)
                except TimeoutError:
                    if proc is not None:
                        proc.close()
                    raise CommandTimeout(
                        f"{self.name}: `{_short(cmd)}` did not finish within {limit:g} s",
                        "the node is slow or stuck: check its load, or try again",
                    ) from None
                except (
                    asyncssh.ChannelOpenError,
                    asyncssh.ConnectionLost,
                    asyncssh.DisconnectError,
                    OSError,
                ) as exc:
                    if retry and attempt == 0 and self._dropped(conn):
                        continue
                    if isinstance(exc, asyncssh.ChannelOpenError):
                        raise UnreachableError(
                            f"{self.name}: the node refused to run `{_short(cmd)}`: {exc.reason}",
                            "check sshd's MaxSessions and the account's restrictions on the node",
                        ) from exc
                    raise self._unreachable(exc) from exc
            if result.exit_status is None and self._dropped(conn):
                # The command did not end: the connection under it did.
                if retry and attempt == 0:
                    continue
                raise UnreachableError(
                    f"{self.name}: the connection dropped while `{_short(cmd)}` ran",
                    "check the network path to the node; run the command again",
                )
            return RunResult(
                stdout=str(result.stdout or ""),
                stderr=str(result.stderr or ""),
                exit_status=result.exit_status,
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def run_argv(self, argv: Sequence[str], timeout: float | None = None) -> RunResult:
        """Run a command given as argv: every element is shell-quoted."""
        return await self.run(shlex.join(list(argv)), timeout)

    def _dropped(self, conn: asyncssh.SSHClientConnection) -> bool:
        """Whether `conn` is gone (then the next call reconnects)."""
        if conn is not self._conn:
            return True  # someone else already reconnected
        return not self.connected

    # --- forwards ---------------------------------------------------------------------

    async def forward_local_port(
        self, dest_host: str, dest_port: int, listen_host: str = "127.0.0.1", listen_port: int = 0
    ) -> int:
        """Forward a local TCP port to dest_host:dest_port (as the node sees it); returns it."""
        await self.ensure_connected()
        listener = await self.connection.forward_local_port(
            listen_host, listen_port, dest_host, dest_port
        )
        port = int(listener.get_port())
        self._forwards.append(_Forward("port", port, dest_host, dest_port, "", listener))
        return port

    async def open_tcp(
        self, dest_host: str, dest_port: int
    ) -> tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]:
        """A direct TCP/IP channel to dest_host:dest_port (as the node sees it) on the open
        connection, with no local listener: its reader and writer (see `remote.ssh_http`)."""
        await self.ensure_connected()
        reader, writer = await self.connection.open_connection(dest_host, dest_port, encoding=None)
        return reader, writer

    def note_docker_host(self, value: str) -> None:
        """The node's DOCKER_HOST as a probe read it (empty when unset): the socket is then
        found without a session of its own."""
        self._docker_host = value.strip()

    async def docker_socket_path(self) -> str:
        """The node's Docker socket: its DOCKER_HOST if that is a unix socket, else the default."""
        if self._docker_socket is not None:
            return self._docker_socket
        value = self._docker_host
        if value is None:
            res = await self.run(probe_commands.DOCKER_HOST_ENV, timeout=15)
            value = res.stdout.strip() if res.ok else ""
        candidates = [DEFAULT_DOCKER_SOCKET]
        if value.startswith("unix://") and value[len("unix://") :] != DEFAULT_DOCKER_SOCKET:
            candidates.insert(0, value[len("unix://") :])
        reasons = []
        for path in candidates:
            # Open one channel to see that sshd forwards this socket (AllowStreamLocalForwarding).
            try:
                _reader, writer = await asyncio.wait_for(
                    self.connection.open_unix_connection(path), self.connect_timeout
                )
            except (asyncssh.ChannelOpenError, OSError, TimeoutError) as exc:
                reasons.append(f"{path}: {getattr(exc, 'reason', None) or exc}")
                continue
            writer.close()
            self._docker_socket = path
            return path
        raise UnreachableError(
            f"{self.name}: the node does not forward its Docker socket ({'; '.join(reasons)})",
            "check that Docker runs on the node, that your user may use its socket (the "
            "docker group), and that sshd allows it (AllowStreamLocalForwarding yes)",
        )

    async def forward_docker_socket(self, remote_path: str | None = None) -> str:
        """Forward the node's Docker socket to a private local unix socket; returns its path."""
        for fwd in self._forwards:
            if fwd.kind == "path" and (remote_path is None or fwd.dest_path == remote_path):
                return str(fwd.listen)
        remote = remote_path or await self.docker_socket_path()
        if self._forward_dir is None:
            # mkdtemp makes the folder 0700: only this user can reach the forwarded socket.
            # The pid in its name tells whose it is: a process killed with SIGKILL (which
            # nothing can catch) leaves its folder, and the next one removes it.
            if not _SWEPT:
                sweep_forward_dirs()
            self._forward_dir = tempfile.mkdtemp(prefix=f"spark-tui-{os.getpid()}-")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.name)
        local = os.path.join(self._forward_dir, f"docker-{safe}.sock")
        await self.ensure_connected()
        listener = await self.connection.forward_local_path(local, remote)
        self._forwards.append(_Forward("path", local, "", 0, remote, listener))
        return local

    async def _restore_forwards(self) -> None:
        for fwd in self._forwards:
            if fwd.listener is not None:
                fwd.listener.close()
            try:
                if fwd.kind == "port":
                    fwd.listener = await self.connection.forward_local_port(
                        "127.0.0.1", int(fwd.listen), fwd.dest_host, fwd.dest_port
                    )
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(str(fwd.listen))
                    fwd.listener = await self.connection.forward_local_path(
                        str(fwd.listen), fwd.dest_path
                    )
            except (OSError, asyncssh.Error) as exc:
                log.warning("%s: could not restore forward %s: %s", self.name, fwd.listen, exc)
                fwd.listener = None


# Whether this process swept the temporary folder already: the first forward of each node's
# connection no longer lists it again (once a process is enough, and a busy /tmp is slow).
_SWEPT = False


def sweep_forward_dirs(root: str | None = None) -> list[str]:
    """Remove this user's forward socket folders (`spark-tui-<pid>-*`) whose process is
    gone; returns the folders removed."""
    import re

    global _SWEPT
    base = root or tempfile.gettempdir()
    _SWEPT = _SWEPT or root is None
    pattern = re.compile(r"^spark-tui-(\d+)-[^/]+$")
    removed = []
    try:
        names = os.listdir(base)
    except OSError:
        return []
    for name in names:
        m = pattern.match(name)
        if m is None:
            continue
        path = os.path.join(base, name)
        try:
            if os.lstat(path).st_uid != os.getuid() or not os.path.isdir(path):
                continue
            os.kill(int(m.group(1)), 0)
            if not _is_zombie(int(m.group(1))):
                continue  # its process still runs
        except ProcessLookupError:
            pass
        except (PermissionError, OSError):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _is_zombie(pid: int) -> bool:
    # A killed process whose parent has not reaped it yet still answers kill(pid, 0);
    # it holds no sockets any more, so its folder is as dead as its process.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


class ConnectionPool:
    """Connections to every node of an inventory, opened in parallel, head first."""

    def __init__(self, nodes: Sequence[InventoryNode], **options: Any) -> None:
        self.nodes = list(nodes)
        self.connections = [NodeConnection(n, **options) for n in self.nodes]
        self.errors: dict[str, SparkError] = {}

    def __getitem__(self, name: str) -> NodeConnection:
        for conn in self.connections:
            if conn.name == name:
                return conn
        raise KeyError(name)

    def __iter__(self) -> Any:
        return iter(self.connections)

    def __len__(self) -> int:
        return len(self.connections)

    @property
    def reachable(self) -> list[NodeConnection]:
        """The connections that opened, in inventory order."""
        return [c for c in self.connections if c.name not in self.errors]

    async def open(self, *, partial: bool = False) -> dict[str, SparkError]:
        """Connect to every node at once. A node that fails is named with its reason: raised
        (as one error covering every failed node) unless `partial`, then returned."""
        # Whatever a killed spark-tui left is cleared when the next one starts, before it
        # needs a forward of its own (a cockpit may attach long before it forwards one).
        sweep_forward_dirs()
        results = await asyncio.gather(
            *(c.connect() for c in self.connections), return_exceptions=True
        )
        self.errors = {}
        for conn, res in zip(self.connections, results, strict=True):
            if isinstance(res, asyncio.CancelledError):
                raise res
            if isinstance(res, SparkError):
                self.errors[conn.name] = res
            elif isinstance(res, BaseException):
                self.errors[conn.name] = conn._unreachable(res)
        if self.errors and not partial:
            await self.close()
            raise combine_errors(list(self.errors.values()), len(self.connections))
        return dict(self.errors)

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections), return_exceptions=True)

    async def __aenter__(self) -> ConnectionPool:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def combine_errors(errors: list[SparkError], total: int) -> SparkError:
    """One error for several failed nodes (a single one is returned as it is)."""
    if len(errors) == 1:
        return errors[0]
    remedies = list(dict.fromkeys(e.remedy for e in errors))
    cls = HostKeyError if all(isinstance(e, HostKeyError) for e in errors) else UnreachableError
    return cls(
        f"{len(errors)} of {total} nodes could not be reached:\n  "
        + "\n  ".join(e.message for e in errors),
        "; ".join(remedies),
    )

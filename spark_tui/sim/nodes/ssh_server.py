"""The SSH side of a simulated node: key-only auth, exec requests and port forwarding."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import asyncssh

from spark_tui.remote import probe_commands as pc
from spark_tui.sim.nodes.commands import RealCommands, kill_group

if TYPE_CHECKING:
    from spark_tui.sim.nodes.node import SimNode

DOCKER_SOCKET_PATHS = ("/var/run/docker.sock", "/run/docker.sock")
_LOCAL_NAMES = ("127.0.0.1", "localhost", "0.0.0.0", "::1", "")


class NodeSSHServer(asyncssh.SSHServer):
    """Accepts the node's user with the cluster's client key; forwards only to this node."""

    def __init__(self, node: SimNode) -> None:
        self.node = node
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self.node.connections.add(conn)
        self.node.connections_accepted += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self.node.connections.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        if self._conn is not None and username == self.node.user:
            self._conn.set_authorized_keys(self.node.authorized_keys)
        return True  # always authenticate: an unknown user simply has no keys

    def public_key_auth_supported(self) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def tcp_destination(self, host: str) -> str | None:
        """Where a direct-tcpip request to `host` goes: this node's address, or a peer's."""
        if host in _LOCAL_NAMES or host in (self.node.address, self.node.hostname, self.node.name):
            return self.node.address
        if host in self.node.peer_addresses:
            return host
        return None

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> Any:
        target = self.tcp_destination(dest_host)
        if target is None or self._conn is None:
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                f"simulated node {self.node.name}: forwarding to {dest_host} is not allowed "
                "(only this node's own and its peers' addresses)",
            )
        return self._conn.forward_connection(target, dest_port)

    def unix_connection_requested(self, dest_path: str) -> Any:
        if dest_path not in DOCKER_SOCKET_PATHS or self._conn is None:
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                f"simulated node {self.node.name}: only /var/run/docker.sock can be forwarded",
            )
        return self._conn.forward_unix_connection(str(self.node.docker_socket))


def process_handler(node: SimNode) -> Callable[[asyncssh.SSHServerProcess[bytes]], Awaitable[None]]:
    """The exec handler of `node`: simulated answers first, else a real `/bin/sh -c`."""

    async def handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command
        if command is None:
            process.stderr.write(
                b"simulated DGX Spark: interactive shells are not offered; run a command\n"
            )
            process.exit(1)
            return
        node.exec_sessions += 1
        if command.strip() == pc.COMBINED:
            process.stdout.write((await node.answer_probe()).encode())
            process.exit(0)
            return
        answer = node.answer(command)
        if answer is not None:
            out, code = answer
            if out:
                process.stdout.write(out.encode())
            process.exit(code)
            return
        status = await run_command(
            process, command, node.shell_env(), str(node.home), node.commands
        )
        if status is not None:
            process.exit(status)

    return handle


async def run_command(
    process: asyncssh.SSHServerProcess[bytes],
    command: str,
    env: dict[str, str],
    cwd: str,
    commands: RealCommands,
) -> int | None:
    """Run `command` with /bin/sh, copying its output to the channel by hand.

    Returns its exit status (128 + N when killed by signal N), or None when the channel
    closed first: then the command's whole process group has been killed. `commands` holds
    it until it has finished, so the node can kill it and wait for it when it stops.
    """
    try:
        child = await commands.start(
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
    except OSError as exc:
        process.stderr.write(f"sh: {exc}\n".encode())
        return 127
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None

    async def copy(src: asyncio.StreamReader, dst: Any) -> None:
        while chunk := await src.read(65536):
            dst.write(chunk)

    async def feed() -> None:
        assert child.stdin is not None
        with contextlib.suppress(Exception):
            while data := await process.stdin.read(65536):
                child.stdin.write(data)
                await child.stdin.drain()
        with contextlib.suppress(Exception):
            child.stdin.close()

    stdout, stderr = child.stdout, child.stderr

    async def finish() -> int:
        await asyncio.gather(copy(stdout, process.stdout), copy(stderr, process.stderr))
        code = await child.wait()
        return 128 - code if code < 0 else code

    feeder = asyncio.create_task(feed())
    done = asyncio.create_task(finish())
    closed = asyncio.create_task(process.channel.wait_closed())
    try:
        await asyncio.wait({done, closed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        feeder.cancel()
        closed.cancel()
        if not done.done():
            kill_group(child.pid)
            done.cancel()
            # Until it has exited, its transport is open (see RealCommands.end).
            # GeneratorExit (the coroutine closed with its loop) is not swallowed.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await child.wait()
    return done.result() if done.done() and not done.cancelled() else None

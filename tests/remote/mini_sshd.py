"""A minimal in-process SSH server on a loopback address, for the SSH-level tests.

It runs each command with the local shell (the tests send only harmless commands) and
can be stopped, restarted on the same port, or given a new host key.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from spark_tui.core.inventory import InventoryNode

REAP_S = 5.0  # a killed shell is gone in milliseconds; the bound only guards a stuck one


async def _run_command(owner: MiniServer, process: asyncssh.SSHServerProcess) -> None:
    cmd = process.command or "true"
    proc = await asyncio.create_subprocess_shell(
        cmd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    owner.procs.append(proc)
    try:
        out, err = await proc.communicate()
        process.stdout.write(out.decode(errors="replace"))
        process.stderr.write(err.decode(errors="replace"))
        process.exit(proc.returncode or 0)
    except (asyncio.CancelledError, BrokenPipeError, ConnectionError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        # Reaped here, while the loop runs: a subprocess transport left to the garbage
        # collector closes itself on whatever loop is current then, often a closed one
        # ("Event loop is closed" in a later test).
        await _reap(proc)
        raise


async def _reap(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(asyncio.CancelledError, TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), REAP_S)


class _Server(asyncssh.SSHServer):
    def __init__(self, owner: MiniServer) -> None:
        self.owner = owner

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.owner.conns.append(conn)

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        self.owner.forwarded.append((dest_host, dest_port))
        return True  # plain TCP forwarding (port forwards, ProxyJump)

    def unix_connection_requested(self, dest_path: str) -> bool:
        return True


@dataclass
class MiniServer:
    """One SSH server on host:port with its own host key."""

    host: str
    client_key_path: Path
    authorized: asyncssh.SSHAuthorizedKeys
    host_key: asyncssh.SSHKey = field(
        default_factory=lambda: asyncssh.generate_private_key("ssh-ed25519")
    )
    port: int = 0
    server: asyncssh.SSHAcceptor | None = None
    conns: list[asyncssh.SSHServerConnection] = field(default_factory=list)
    forwarded: list[tuple[str, int]] = field(default_factory=list)
    procs: list[asyncio.subprocess.Process] = field(default_factory=list)  # commands it ran

    async def start(self) -> None:
        self.server = await asyncssh.create_server(
            lambda: _Server(self),
            self.host,
            self.port,
            server_host_keys=[self.host_key],
            authorized_client_keys=self.authorized,
            process_factory=lambda process: _run_command(self, process),
            encoding="utf-8",
        )
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        # Connections first: from Python 3.12 on, wait_closed also waits for them to end.
        if self.server is not None:
            self.server.close()
        for conn in self.conns:
            conn.abort()
        self.conns = []
        if self.server is not None:
            await self.server.wait_closed()
            self.server = None
        # A command whose client went keeps running, as under a real sshd without a tty:
        # stopped here, and every shell reaped before the test's loop can close.
        for proc in self.procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
            await _reap(proc)

    def drop_connections(self) -> None:
        for conn in self.conns:
            conn.abort()
        self.conns = []

    def fingerprint(self) -> str:
        return str(self.host_key.get_fingerprint("sha256"))

    def known_hosts_line(self) -> str:
        pub = self.host_key.export_public_key("openssh").decode().strip()
        return f"[{self.host}]:{self.port} {pub}\n"

    def node(self, name: str, known_hosts: Path) -> InventoryNode:
        return InventoryNode(
            name=name,
            host=self.host,
            port=self.port,
            user=os.environ.get("USER", "root"),
            identity_file=str(self.client_key_path),
            known_hosts=str(known_hosts),
        )

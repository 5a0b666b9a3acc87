"""The commands a simulated node runs for real (`/bin/sh -c`, each the leader of a process
group of its own), started here and held until they have finished, so that the node's end
kills them and waits for them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

# asyncio's own default for a subprocess's stream buffers.
_STREAM_LIMIT = 2**16
# A killed command is gone in milliseconds; its exit is seen later on a loaded machine (two
# cores running real vLLM beside the tests took more than 5 s once).
END_TIMEOUT_S = 15.0


class _FinishProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a subprocess's streams, telling when the subprocess is done
    with: exited and every pipe closed (its transport then closed). `Process.wait` alone
    does not say so once the exit was seen: the pipes may still be open."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=_STREAM_LIMIT, loop=loop)
        self.finished: asyncio.Future[None] = loop.create_future()
        self._stdin_lost = False

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        # asyncio's protocol reports its stdin pipe's end through `connection_lost` too:
        # that one says nothing of the subprocess, which may still be running.
        self._stdin_lost = fd == 0
        try:
            super().pipe_connection_lost(fd, exc)
        finally:
            self._stdin_lost = False

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._stdin_lost and not self.finished.done():
            self.finished.set_result(None)


class RealCommands:
    """The running commands of one node, by pid (also their process group's id)."""

    def __init__(self) -> None:
        self._running: dict[int, asyncio.Future[None]] = {}
        self.closing = False  # set once the node began to close: no command may start now

    async def start(self, command: str, **options: Any) -> asyncio.subprocess.Process:
        """`/bin/sh -c command` in a process group of its own, held until it has finished;
        killed at once when the node is closing. `options` as create_subprocess_exec's."""
        loop = asyncio.get_running_loop()
        protocol = _FinishProtocol(loop)
        transport, _ = await loop.subprocess_exec(
            lambda: protocol, "/bin/sh", "-c", command, start_new_session=True, **options
        )
        child = asyncio.subprocess.Process(transport, protocol, loop)
        pid = child.pid
        self._running[pid] = protocol.finished
        protocol.finished.add_done_callback(lambda _: self._running.pop(pid, None))
        if self.closing:
            kill_group(pid)
        return child

    async def end(self, timeout: float = END_TIMEOUT_S) -> None:
        """Kill every command (one started meanwhile too) and wait until each has finished
        (exited, its pipes and transport closed), at most `timeout` s. A subprocess transport
        left open is closed by the garbage collector later, on an event loop that may be
        gone by then ("Event loop is closed")."""
        self.closing = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._running:
            for pid in list(self._running):
                kill_group(pid)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            await asyncio.wait(list(self._running.values()), timeout=remaining)


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads: the command's children go with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)

"""The commands a simulated node runs for real (`/bin/sh -c`, each the leader of a process
group of its own), held while they run so that the node's end kills them and waits for them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal


class RealCommands:
    """The running commands of one node, by pid (also their process group's id)."""

    def __init__(self) -> None:
        self._running: dict[int, asyncio.subprocess.Process] = {}
        self.closing = False  # set once the node began to close: no command may start now

    def add(self, child: asyncio.subprocess.Process) -> None:
        """Hold a started command until `discard`; killed at once when the node is closing."""
        self._running[child.pid] = child
        if self.closing:
            kill_group(child.pid)

    def discard(self, child: asyncio.subprocess.Process) -> None:
        self._running.pop(child.pid, None)

    async def end(self, timeout: float = 5.0) -> None:
        """Kill every command (one started meanwhile too) and wait until each has exited and
        its pipes are closed, at most `timeout` s. A command's subprocess transport is closed
        only then; one left open is closed by the garbage collector later, on an event loop
        that may be gone by then ("Event loop is closed")."""
        self.closing = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        waited: set[int] = set()
        while left := [c for pid, c in self._running.items() if pid not in waited]:
            for child in left:
                kill_group(child.pid)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(c.wait() for c in left)), remaining)
            waited.update(c.pid for c in left)


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads: the command's children go with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)

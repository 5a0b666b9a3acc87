"""Running a headless command so that Ctrl+C, SIGTERM and SIGHUP all end it cleanly.

The first signal cancels the command's coroutine: its finally blocks run, so the pool
closes (no `/tmp/spark-tui-*` socket folder is left) and a launch removes what it started.
A second signal only says that the clean-up is under way; a third abandons it, and the
command then says what is left and the command that removes it. The process exits with
128 + the signal's number (130 for Ctrl+C, 143 for SIGTERM, 129 for SIGHUP).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from spark_tui.service.session import Session

T = TypeVar("T")

HANDLED = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None
)


class CommandInterrupted(KeyboardInterrupt):
    """A command ended by a signal (after its clean-up ran); `exit_code` is 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


class Interrupts:
    """The signals the running command received, in order."""

    def __init__(self) -> None:
        self.received: list[int] = []

    @property
    def count(self) -> int:
        return len(self.received)

    @property
    def abandoned(self) -> bool:
        """True once the user interrupted the clean-up itself (a third signal)."""
        return self.count >= 3


# The signals of the command running now (one per process: the CLI runs one command).
current = Interrupts()


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_command(main: Callable[[], Awaitable[T]]) -> T:
    """Run `main()` in a new event loop with the signal handling described above; raises
    CommandInterrupted (a KeyboardInterrupt) when a signal ended it."""
    global current
    current = Interrupts()
    interrupts = current

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(signum: int) -> None:
            interrupts.received.append(signum)
            if interrupts.count == 2:
                _say(
                    "spark-tui: still cleaning up; interrupt once more to stop waiting "
                    "(it then says what is left)"
                )
            else:
                task.cancel()

        installed = []
        for sig in HANDLED:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, on_signal, int(sig))
                installed.append(sig)
        try:
            return await main()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        if not interrupts.received:
            raise
        raise CommandInterrupted(interrupts.received[0]) from None


async def _say_what_is_left(session: Session, cluster_id: str, remove_with: str) -> None:
    from spark_tui.core.errors import SparkError

    left = "its containers (not checked: the nodes did not answer in time)"
    with contextlib.suppress(SparkError, TimeoutError, OSError):
        found = await asyncio.wait_for(session.nodes.status(), 5)
        left = ", ".join(
            f"{r.container} on {r.node} ({r.state})"
            for c in found
            if c.cluster_id == cluster_id
            for r in c.ranks
        )
    if left:
        _say(f"left on the nodes: {left}\n  remove them with: {remove_with}")
    else:
        _say(f"nothing of cluster {cluster_id} is left on the nodes")


async def report_left(session: Session, cluster_id: str, remove_with: str) -> None:
    """After an interrupted action cleaned up: say what of `cluster_id` is left on the nodes
    (and how to remove it), or that nothing is."""
    if current.abandoned:
        _say("spark-tui: clean-up interrupted; checking what is left...")
    else:
        _say(f"interrupted: cluster {cluster_id} was being removed; checking the nodes...")
    await _say_what_is_left(session, cluster_id, remove_with)

"""The demo ends whole: quitting while its simulated Sparks run a command for the cockpit
leaves nothing they started (a command, a task) for the garbage collector to close after
their event loop is gone ("Event loop is closed")."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cockpit_helpers import SLACK, cockpit, live_children, wait_until, wait_until_gone

from spark_tui.remote import probe_commands as pc
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession


@contextmanager
def unraisable_errors() -> Iterator[list[str]]:
    """What the interpreter could not raise meanwhile (an object's __del__ failing, a
    coroutine closed by the garbage collector), one text each, collected at the end."""
    found: list[str] = []
    previous = sys.unraisablehook

    def keep(unraisable: sys.UnraisableHookArgs) -> None:
        found.append(
            f"{unraisable.err_msg or 'Exception ignored in'}: {unraisable.object!r}: "
            f"{unraisable.exc_type.__name__}: {unraisable.exc_value}"
        )

    sys.unraisablehook = keep
    try:
        yield found
        for _ in range(3):
            gc.collect()
    finally:
        sys.unraisablehook = previous


def unfinished_subprocesses() -> list[asyncio.SubprocessTransport]:
    """Subprocess transports not closed yet: each left behind is closed by the garbage
    collector, on a loop that may be gone by then."""
    return [
        o
        for o in gc.get_objects()
        if isinstance(o, asyncio.SubprocessTransport) and not o.is_closing()
    ]


def running(command: str) -> list[int]:
    """This process's running children that run `command`."""
    found = []
    for pid in live_children():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if command in argv:
            found.append(pid)
    return found


async def test_quitting_during_a_probe_leaves_no_command_to_the_garbage_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A section that runs for real and takes long (a big Hugging Face cache's scan): the
    # demo quits while the simulated nodes run it.
    slow = "sleep 47; echo done"
    monkeypatch.setitem(pc.SECTIONS, "hf_cache", slow)
    before = live_children()
    backend = DemoSession(pace=0.05, token_scale=0.05, base_address=random_loopback_base())
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    with unraisable_errors() as errors:
        async with cockpit(app, (120, 40)) as pilot:
            deadline = time.monotonic() + 60 * SLACK
            while len(running(slow)) < 2:  # one on each node
                assert time.monotonic() < deadline, "the slow sections never started"
                await pilot.pause(0.05)
            assert not app.discovered.is_set()
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, 30, "exit")
        assert backend.sim is None
        # At once: the nodes waited for the commands they killed.
        left = unfinished_subprocesses()
        assert not left, left
        await wait_until_gone(before)
    assert not errors, errors

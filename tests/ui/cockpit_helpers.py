"""Helpers for the cockpit's Pilot tests: wait for a state, read what the screen shows."""

from __future__ import annotations

import asyncio
import html
import io
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Input, Static

from spark_tui.ui.app import SparkApp
from spark_tui.ui.widgets.logpane import LogPane

# The deadlines below only bound a hung test: a loaded 2-core machine renders the cockpit
# several times slower than an idle one, so each is stretched by this much.
SLACK = 6.0


async def wait_until(
    pilot: Pilot[int], condition: Callable[[], object], timeout: float, what: str
) -> None:
    """Let the app run until `condition()` holds; fail with `what` after `timeout` s
    (times SLACK)."""
    timeout *= SLACK
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {what}\n{shown(pilot.app)}"
            )
        await pilot.pause(0.05)


def shown(app: object) -> str:
    """What the cockpit showed when a wait timed out (its status and results, what it was
    busy with, each pane's state): a rare timeout in a full run is read from this alone."""
    if not isinstance(app, SparkApp):
        return ""
    parts = [f"screen: {type(app.screen).__name__}"]
    try:
        parts.append(f"busy: {getattr(app.screen, 'busy', None)!r}")
        parts.append("panes: " + ", ".join(f"{r}={p.state}" for r, p in app.panes.items()))
        parts.append("results: " + results_text(app).strip())
    except Exception as exc:  # the main screen may be under a modal or gone
        parts.append(f"(not all readable: {exc!r})")
    return "\n".join(parts)


@asynccontextmanager
async def cockpit(app: SparkApp, size: tuple[int, int], **run: Any) -> AsyncIterator[Pilot[int]]:
    """`app.run_test(size=size, **run)`, then the app's session closed, as `run_cockpit`
    closes it after the app: however the test ends (not by its quit key, or failing), the
    simulated Sparks and the SSH connections it opened end with it, on its event loop."""
    try:
        async with app.run_test(size=size, **run) as pilot:
            yield pilot
    finally:
        await asyncio.wait_for(app.session.close(), 30 * SLACK)


async def settle(pilot: Pilot[int]) -> None:
    """Flush every log pane's pending lines and let the screen catch up."""
    app = pilot.app
    assert isinstance(app, SparkApp)
    await pilot.pause(0.15)
    for pane in app.query(LogPane):
        pane.flush()
    await pilot.pause(0.1)
    await pilot.wait_for_scheduled_animations()
    for box in app.screen.query(Input):
        box.cursor_blink = False  # a blinking cursor would make snapshots flaky


def static_text(app: SparkApp, selector: str) -> str:
    """The plain text a Static shows."""
    widget = app.screen.query_one(selector, Static)
    return plain(widget.content)


def plain(renderable: object) -> str:
    """Any renderable as plain text (wide enough not to wrap)."""
    console = Console(width=400, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def results_text(app: SparkApp) -> str:
    from spark_tui.ui.widgets.results import ResultsBar

    return plain(app.query_one(ResultsBar).render_body())


def head_text(app: SparkApp, rank: int) -> str:
    return plain(app.panes[rank]._head_text())


def live_children() -> set[int]:
    """Pids of this process's children that are still running (not zombies)."""
    me, found = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def _command_of(pid: int) -> str:
    try:
        raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "(gone)"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:160]


async def wait_until_gone(before: set[int]) -> None:
    """Wait (10 s, stretched by SLACK on a loaded machine, at most) until every child
    process started since `before` has ended; those left are named with their command."""
    deadline = time.monotonic() + 10 * SLACK
    while left := live_children() - before:
        if time.monotonic() > deadline:
            named = "; ".join(f"{pid}: {_command_of(pid)}" for pid in sorted(left))
            raise AssertionError(f"processes left behind: {named}")
        await asyncio.sleep(0.1)


_SVG_TEXT = re.compile(
    r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" '
    r'clip-path="url\(#[\w-]*line-(\d+)\)">([^<]*)</text>'
)


def screen_lines(app: SparkApp) -> list[str]:
    """What the terminal shows now, line by line, as the user reads it (from the app's own
    screenshot: each piece of text at its column)."""
    svg = app.export_screenshot()
    width, height = app.size
    rows = [[" "] * width for _ in range(height)]
    for x, line, text in _SVG_TEXT.findall(svg):
        row, col = int(line), round(float(x) / 12.2)
        for i, ch in enumerate(html.unescape(text).replace("\xa0", " ")):
            if row < height and col + i < width:
                rows[row][col + i] = ch
    return ["".join(r).rstrip() for r in rows]

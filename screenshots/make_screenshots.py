"""Make the README's screenshots: the real cockpit on the simulated Sparks of `spark-tui demo`.

Drives the app with Textual's Pilot (no terminal needed) through the demo story and saves
one SVG per state next to this file. Run history and config go to a temporary folder, so
a developer's own runs and themes never show up in the pictures.
Usage: python screenshots/make_screenshots.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZE = (140, 42)
SMALL = (80, 24)
WIDE_4 = (160, 48)


async def wait(pilot, condition: Callable[[], object], timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"make_screenshots: timed out waiting for {what}")
        await pilot.pause(0.1)


async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
    from textual.widgets import Input

    from spark_tui.ui.widgets.logpane import LogPane

    await pilot.pause(0.3)
    for pane in pilot.app.query(LogPane):
        pane.flush()
    for box in pilot.app.screen.query(Input):
        box.cursor_blink = False
    await pilot.pause(0.2)


def save(app, name: str) -> None:  # type: ignore[no-untyped-def]
    app.save_screenshot(filename=name, path=str(HERE))
    print(f"  {name}", file=sys.stderr)


async def story() -> None:
    """Discover, launch, ready + smoke, benchmark, edit a setting and compare, history,
    a sweep's table and chart."""
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.demo_session import DemoSession

    backend = DemoSession(pace=0.25, token_scale=0.2)
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait(pilot, app.discovered.is_set, 60, "discovery")
        await settle(pilot)
        save(app, "01-discovered.svg")
        await pilot.press("l")
        await wait(
            pilot,
            lambda: all((p.progress or 0) >= 0.4 for p in app.panes.values()),
            120,
            "loading",
        )
        await settle(pilot)
        save(app, "02-launching.svg")
        await wait(pilot, lambda: app.cluster and app.cluster.ready, 180, "ready")
        await pilot.press("t")
        await wait(pilot, lambda: app.last_smoke is not None, 120, "smoke")
        await settle(pilot)
        save(app, "03-ready-smoke.svg")
        await pilot.press("b")
        await wait(
            pilot, lambda: type(app.screen).__name__ == "BenchDialog", 30, "the bench dialog"
        )
        await pilot.press("enter")  # run with the dialog's settings
        await wait(pilot, lambda: app.last_bench is not None, 300, "benchmark")
        await settle(pilot)
        save(app, "04-bench.svg")
        await pilot.press("e", *"max_num_seqs", "enter", "8")
        await settle(pilot)
        save(app, "08-edit-setting.svg")
        await pilot.press("enter")
        await wait(pilot, lambda: app.last_compare is not None, 600, "comparison")
        await settle(pilot)
        save(app, "05-compare.svg")
        await pilot.press("h")
        await settle(pilot)
        save(app, "09-history.svg")
        await pilot.press("escape")
        await sweep(pilot, app)
        save(app, "14-sweep.svg")
        await pilot.press("escape")
        await wait(pilot, lambda: app.busy is None, 300, "the sweep to end")
        await pilot.press("q")
        await pilot.pause(0.2)
        await pilot.press("y")
        await wait(pilot, lambda: not app.is_running, 60, "exit")


async def sweep(pilot, app) -> None:  # type: ignore[no-untyped-def]
    """Three values of max_num_seqs from the edit dialog, one that the fit check refuses in
    vLLM's words (above the recipe's max_num_batched_tokens), with a target: until the table
    and chart show."""
    from spark_tui.ui.screens.sweep import SweepScreen

    await pilot.press("e", *"max_num_seqs", "enter", *"2,8192,8", "tab", *"ttft_p95<=2s@c8")
    await pilot.press("enter")
    await wait(
        pilot,
        lambda: isinstance(app.screen, SweepScreen) and app.last_sweep and app.last_sweep.done,
        900,
        "the sweep",
    )
    await settle(pilot)


async def failure() -> None:
    """A worker that dies after ready: the failed rank, its lines, the other rank stopped."""
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.demo_session import DemoSession

    backend = DemoSession(pace=0.1, token_scale=0.2, worker_dies_after=1.0)
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait(pilot, app.discovered.is_set, 60, "discovery")
        await pilot.press("l")
        await wait(pilot, lambda: app.cluster and app.cluster.failed, 180, "the failure")
        await wait(pilot, lambda: app.busy is None, 60, "the launch to end")
        await settle(pilot)
        save(app, "06-failed-rank.svg")
        await pilot.press("q")
        await wait(pilot, lambda: not app.is_running, 60, "exit")


async def small() -> None:
    """80x24 over SSH: both ranks ready, smoke and benchmark results, help, a sweep's table
    and (scrolled) chart."""
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.demo_session import DemoSession

    backend = DemoSession(pace=0.1, token_scale=0.2)
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=SMALL) as pilot:
        await wait(pilot, app.discovered.is_set, 60, "discovery")
        await pilot.press("l")
        await wait(pilot, lambda: app.cluster and app.cluster.ready, 180, "ready")
        await pilot.press("t")
        await wait(pilot, lambda: app.last_smoke is not None, 120, "smoke")
        await pilot.press("b")
        await wait(
            pilot, lambda: type(app.screen).__name__ == "BenchDialog", 30, "the bench dialog"
        )
        await pilot.press("enter")  # run with the dialog's settings
        await wait(pilot, lambda: app.last_bench is not None, 300, "benchmark")
        await settle(pilot)
        save(app, "07-80x24.svg")
        await pilot.press("question_mark")
        await settle(pilot)
        save(app, "10-help-80x24.svg")
        await pilot.press("escape")
        await sweep(pilot, app)
        save(app, "15-sweep-table-80x24.svg")
        await pilot.press("end")
        await settle(pilot)
        save(app, "16-sweep-chart-80x24.svg")
        await pilot.press("escape")
        await wait(pilot, lambda: app.busy is None, 300, "the sweep to end")
        await pilot.press("q")
        await pilot.pause(0.2)
        await pilot.press("y")
        await wait(pilot, lambda: not app.is_running, 60, "exit")


async def four_nodes(size: tuple[int, int], name: str, dies: bool) -> None:
    """`spark-tui demo --nodes 4`: TP 2 x DP 2 set in the edit dialog, launched; ready and
    smoke-checked, or (`dies`) a worker killed after ready, its tab brought forward."""
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.demo_session import DemoSession

    backend = DemoSession(
        nodes=4, pace=0.1, token_scale=0.2, worker_dies_after=1.0 if dies else None
    )
    app = SparkApp(backend, recipe="gpt-oss-120b-cluster", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=size) as pilot:
        await wait(pilot, app.discovered.is_set, 60, "discovery")
        for setting in ("tensor_parallel", "data_parallel"):
            await pilot.press("e", *setting, "enter", "2", "enter")
            await settle(pilot)
        await pilot.press("l")
        if dies:
            await wait(pilot, lambda: app.cluster and app.cluster.failed, 180, "the failure")
            await wait(pilot, lambda: app.busy is None, 60, "the launch to end")
        else:
            await wait(pilot, lambda: app.cluster and app.cluster.ready, 180, "ready")
            await pilot.press("t")
            await wait(pilot, lambda: app.last_smoke is not None, 120, "smoke")
        await settle(pilot)
        save(app, name)
        await pilot.press("q")
        if not dies:
            await pilot.pause(0.2)
            await pilot.press("y")
        await wait(pilot, lambda: not app.is_running, 60, "exit")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="spark-tui-shots-") as tmp:
        os.environ["SPARK_TUI_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")
        os.environ.pop("NO_COLOR", None)
        print(f"writing screenshots into {HERE}", file=sys.stderr)
        asyncio.run(story())
        asyncio.run(failure())
        asyncio.run(small())
        asyncio.run(four_nodes(WIDE_4, "12-four-nodes.svg", dies=False))
        asyncio.run(four_nodes(SMALL, "13-four-nodes-failed-80x24.svg", dies=True))


if __name__ == "__main__":
    main()

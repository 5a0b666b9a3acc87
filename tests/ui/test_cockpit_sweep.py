"""A sweep from the cockpit on the demo's simulated Sparks: `e`, values with commas and a
target, progress in the status line, then the table and the chart, readable at 160x48 and
at 80x24; Esc during a sweep asks what to leave running. max_num_seqs 8192 does not start
(the fit check refuses it in vLLM's words, above the recipe's max_num_batched_tokens of 4096,
so it is never launched) and the sweep goes on."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cockpit_helpers import cockpit, plain, settle, wait_until
from rich.console import Console

from spark_tui.ops.bench import BenchConfig
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession
from spark_tui.ui.screens.edit import EditSettingDialog
from spark_tui.ui.screens.sweep import LeaveSweepDialog, SweepScreen, table_renderable
from spark_tui.ui.widgets.sweepchart import SweepChart

QUICK = BenchConfig(concurrency=(2,), prompt_tokens=16, output_tokens=8, requests_per_level=4)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(data))
    return data


def demo_app() -> SparkApp:
    backend = DemoSession(
        pace=0.05, token_scale=0.05, base_address=random_loopback_base(), bench_config=QUICK
    )
    return SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)


def rendered(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def start_sweep(pilot, app: SparkApp) -> None:  # type: ignore[no-untyped-def]
    await wait_until(pilot, app.discovered.is_set, 30, "discovery")
    await pilot.press("l")
    await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 60, "ready")
    await pilot.press("e")
    await pilot.pause(0.05)
    assert isinstance(app.screen, EditSettingDialog)
    await pilot.press(*"max_num_seqs", "enter", *"2,8192,8")
    await pilot.pause(0.05)
    preview = plain(app.screen.query_one("#edit-preview").content)
    assert "sweep of 3 values of max_num_seqs" in preview, preview
    await pilot.press("tab", *"errors<=0@c2", "tab", *"tok_s@c2", "enter")
    await pilot.pause(0.05)
    assert not isinstance(app.screen, EditSettingDialog)


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
async def test_sweep_from_the_edit_dialog_table_and_chart(size: tuple[int, int]) -> None:
    app = demo_app()
    async with cockpit(app, size) as pilot:
        await start_sweep(pilot, app)
        await wait_until(pilot, lambda: app.busy == "sweep", 10, "the sweep")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, SweepScreen) and app.last_sweep and app.last_sweep.done,
            240,
            "the sweep's result",
        )
        await settle(pilot)
        result = app.last_sweep
        assert result is not None
        rows = {r.raw: r for r in result.ordered_rows()}
        assert rows["8192"].status == "did not start" and rows["2"].measured and rows["8"].measured
        best = result.best()
        assert best is not None and best.raw in ("2", "8")
        # The table fits the screen's width, every column and verdict readable.
        width = size[0] - 4
        table = rendered(table_renderable(result), width)
        assert "…" not in table and max(len(line) for line in table.splitlines()) <= width
        for heading in ("max_num_seqs", "verdict", "tok_s@c2", "errors@c2", "vs base", "noise"):
            assert heading in table, table
        assert "did not start" in table and "meets" in table
        notes = plain(app.screen.query_one("#sweep-notes").content)
        assert "8192: did not start" in notes and "max_num_batched_tokens (4096)" in notes
        assert "does not fit" in notes and not rows["8192"].rank_lines, notes
        assert "best: max_num_seqs=" in notes
        # The chart: the two measured values as bars, the refused one marked, labelled.
        chart = app.screen.query_one(SweepChart)
        text = plain(chart.content)
        assert "tok_s@c2 against max_num_seqs" in text and "█" in text and "✗" in text
        assert "no start" in text and "best" in text
        assert max(len(line) for line in text.splitlines()) <= size[0] - 2
        # Scrolled to the chart at 80x24, it is on screen whole.
        await pilot.press("end")
        await settle(pilot)
        assert chart.region.height > 0 and chart.region.bottom <= size[1]
        # `f` charts the target's figure; the target drawn at its limit.
        await pilot.press("f")
        await settle(pilot)
        assert "errors@c2 against max_num_seqs" in plain(chart.content)
        assert "target <= 0" in plain(chart.content)
        await pilot.press("escape")
        await pilot.pause(0.05)
        assert not isinstance(app.screen, SweepScreen)
        await pilot.press("w")  # the last sweep again
        await pilot.pause(0.05)
        assert isinstance(app.screen, SweepScreen)
        await pilot.press("escape")
        # The baseline's settings run again (no --apply-best from the cockpit's sweep).
        await wait_until(pilot, lambda: app.busy is None, 60, "the sweep to end")
        assert app.cluster is not None and app.cluster.ready
        await app.main.stop_now()


async def test_escape_during_a_sweep_asks_what_to_leave_running() -> None:
    app = demo_app()
    async with cockpit(app, (80, 24)) as pilot:
        await start_sweep(pilot, app)
        await wait_until(
            pilot,
            lambda: app.last_sweep is not None and len(app.last_sweep.rows) >= 1,
            120,
            "the first value",
        )
        await pilot.press("escape")
        await pilot.pause(0.05)
        assert isinstance(app.screen, LeaveSweepDialog)
        body = plain(app.screen.query_one(".body").content)
        assert "1 of 3 values measured" in body and "best: max_num_seqs=2" in body
        await pilot.press("b")  # the best so far: 2, the only value measured
        await wait_until(pilot, lambda: isinstance(app.screen, SweepScreen), 120, "the result")
        await wait_until(pilot, lambda: app.busy is None, 60, "the leave")
        assert app.last_sweep is not None and app.last_sweep.interrupted
        assert app.cluster is not None and app.cluster.ready
        assert app.cluster.overrides.get("max_num_seqs") in ("2", 2)
        await app.main.stop_now()

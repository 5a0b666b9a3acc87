"""At 80x24 the benchmark's figures, the comparison with the baseline (the noise beside each
verdict) and the history's comparison are on screen, as the user reads it; the bench dialog
sets the workload the benchmark sends."""

from __future__ import annotations

from cockpit_helpers import screen_lines, settle, wait_until
from cockpit_replay import ReplaySession
from snapshot_states import make_app, ready
from textual.widgets import DataTable

from spark_tui.service.bench import BenchConfig
from spark_tui.ui.app import SparkApp
from spark_tui.ui.screens.bench import FIELDS, BenchDialog
from spark_tui.ui.screens.info import HistoryScreen, ResultsScreen

SIZE = (80, 24)


def _row(lines: list[str], *parts: str) -> str:
    """The one line holding every part (the figures of one level, say)."""
    found = [line for line in lines if all(p in line for p in parts)]
    assert found, f"no line with {parts} in:\n" + "\n".join(lines)
    return found[0]


def _level_parts(level: object) -> tuple[str, str, str, str]:
    f = level.figures  # type: ignore[attr-defined]
    return (
        f"c{level.concurrency} ",  # type: ignore[attr-defined]
        f"{f['total_output_tps']:.0f} tok/s",
        f"TTFT p50 {f['ttft_p50_s'] * 1000:.0f} ms",
        f"ITL {f['itl_mean_s'] * 1000:.1f} ms",
    )


async def _bench(pilot, app: SparkApp) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("b")
    await wait_until(pilot, lambda: isinstance(app.screen, BenchDialog), 5, "the bench dialog")
    await pilot.press("enter")
    await wait_until(pilot, lambda: app.last_bench is not None, 10, "the benchmark")
    await settle(pilot)


async def test_every_level_s_figures_are_on_screen_after_b() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("t")
        await wait_until(pilot, lambda: app.last_smoke is not None, 10, "smoke")
        await _bench(pilot, app)
        lines = screen_lines(app)
        assert app.last_bench is not None
        levels = app.last_bench.result.levels
        assert len(levels) == 3
        for level in levels:
            _row(lines, *_level_parts(level))
        _row(lines, "benchmark done", "v every figure")
        # The full view: every figure of every level, in 80 columns.
        await pilot.press("v")
        await wait_until(pilot, lambda: isinstance(app.screen, ResultsScreen), 5, "results")
        await settle(pilot)
        lines = screen_lines(app)
        _row(lines, "level", "TTFT p50", "TTFT p95", "ITL mean", "ITL p95", "tok/s", "err")
        for level in levels:
            _row(lines, f"c{level.concurrency} ", f"{level.figures['total_output_tps']:.2f}")
        _row(lines, "workload: prompt 256 tokens, output 128 tokens")
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, ResultsScreen)


async def test_the_bench_dialog_sets_the_workload_and_refuses_a_bad_value() -> None:
    backend = ReplaySession()
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("b")
        await wait_until(pilot, lambda: isinstance(app.screen, BenchDialog), 5, "dialog")
        await settle(pilot)
        lines = screen_lines(app)
        for _, label, _ in FIELDS:  # every setting fits on the screen
            _row(lines, label)
        dialog = app.screen
        assert isinstance(dialog, BenchDialog)

        async def type_into(name: str, value: str) -> None:
            field = dialog.query_one(f"#bench-{name}")
            field.focus()
            await pilot.press("ctrl+a", "ctrl+k", *value)

        await type_into("prompt_tokens", "512-128")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, BenchDialog)  # not run: the error says why
        _row(screen_lines(app), "prompt tokens '512-128'")
        await type_into("prompt_tokens", "normal:300,50")
        await type_into("shared_prefix", "50%")
        await type_into("context_depths", "0,4k")
        await type_into("goodput", "ttft<=2s itl<=80ms")
        await type_into("repeats", "2")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.last_bench is not None, 10, "the benchmark")
        config = backend.nodes.bench_configs[-1]
        assert isinstance(config, BenchConfig) and config.repeats == 2
        workload = config.workload
        assert str(workload.prompt_tokens) == "normal:300,50,150-450"
        assert workload.shared_prefix == 0.5 and workload.context_depths == (0, 4096)
        assert [str(t) for t in workload.goodput] == ["ttft<=2s", "itl<=80ms"]
        # The session keeps them: the next benchmark (and a tune's new baseline) too.
        assert backend.bench_config == config
        await pilot.press("b")
        await wait_until(pilot, lambda: isinstance(app.screen, BenchDialog), 5, "dialog")
        assert app.screen.query_one("#bench-shared_prefix").value == "0.5"  # type: ignore[attr-defined]
        await pilot.press("escape")


async def test_the_comparison_and_its_noise_are_on_screen_after_a_change() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("e", *"max_num_seqs", "enter", "8", "enter")
        await wait_until(pilot, lambda: app.last_compared is not None, 15, "comparison")
        await settle(pilot)
        lines = screen_lines(app)
        _row(lines, "compared with the baseline below")
        _row(lines, "vs baseline", "max_num_seqs")
        # Below the status: each figure's verdict with the noise it was judged against.
        _row(lines, "c1", "TTFT p50", "within noise", "(noise ")
        _row(lines, "c1", "tok/s", "within noise", "(noise 5.0%)")
        await pilot.press("v")
        await wait_until(pilot, lambda: isinstance(app.screen, ResultsScreen), 5, "results")
        await settle(pilot)
        header = _row(
            screen_lines(app), "level", "figure", "baseline", "run", "delta", "noise", "verdict"
        )
        assert header.rstrip(" │▂▆█").endswith("verdict")  # no column cut at the edge
        await pilot.press("end")
        await settle(pilot)
        lines = screen_lines(app)
        compared = app.last_compared
        assert compared is not None
        last = compared.comparison.figures[-1]
        _row(lines, f"c{last.concurrency}", "errors")
        row = _row(lines, "c8", "tok/s", "within noise")
        assert "%" in row.split("tok/s")[1]  # the delta and the noise beside the verdict


async def test_the_history_s_comparison_columns_fit_80_columns() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await _bench(pilot, app)
        await _bench(pilot, app)
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen), 5, "history")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        benches = [i for i, r in enumerate(screen.runs) if r.get("kind") == "bench"]
        table = screen.query_one(DataTable)
        table.move_cursor(row=benches[1])  # the older benchmark: the baseline
        await pilot.press("b")
        table.move_cursor(row=benches[0])
        await settle(pilot)
        await pilot.press("tab")  # into the details, which scroll
        await settle(pilot)
        _row(screen_lines(app), "against baseline")
        headers = []
        for _ in range(4):  # down the details until the table's header shows
            lines = screen_lines(app)
            headers = [line for line in lines if "level" in line and "figure" in line]
            if headers:
                break
            await pilot.press("down")
            await settle(pilot)
        header = _row(headers, "level", "figure", "baseline", "run", "delta", "noise")
        assert header.rstrip(" │▂▆█").endswith("verdict")  # no column cut at the edge
        await pilot.press("end")
        await settle(pilot)
        lines = screen_lines(app)
        row = _row(lines, "c8", "errors")
        assert row.rstrip(" │▂▆█").split()[-1] in ("noise", "n/a", "better", "worse"), row
        _row(lines, "c8", "tok/s", "%", "within noise")

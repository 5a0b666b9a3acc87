"""What `bench` prints and `history show` gives back: the levels table within 80 columns,
each main figure's 95 % interval readable when its lower bound is negative."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui import cli
from spark_tui.commands.bench import ci_text, format_table
from spark_tui.core.workload import Workload
from spark_tui.ops.bench import BenchConfig, BenchResult, LevelResult
from spark_tui.ops.history import History


def test_an_interval_reads_as_a_range_with_a_negative_lower_bound() -> None:
    said = ci_text({"ttft_p50_s": [-0.06266, 1.41092], "total_output_tps": [29.64, 36.08]})
    assert said == "TTFT p50 -62.66 to 1410.92 ms, tok/s 29.64 to 36.08"


def _level(depth: int = 0) -> LevelResult:
    figures = {
        "ttft_p50_s": 1.2345, "ttft_p95_s": 12.345, "itl_mean_s": 0.0863, "itl_p95_s": 0.0918,
        "tps_per_request_mean": 25.69, "total_output_tps": 1023.39, "requests_per_s": 10.58,
        "goodput_rps": 10.58,
    }  # fmt: skip
    ci95 = {"ttft_p50_s": [-0.06266, 1.41092]}
    level = LevelResult(64, 1280, 0, 60.0, figures, ci95=ci95, context_depth=depth)
    level.metrics = {"kv_cache_usage_perc": {"max": 0.93}, "num_requests_running": {"max": 64}}
    return level


def test_the_levels_table_fits_80_columns_in_two_parts_when_one_would_not() -> None:
    level = _level(16384)
    workload = Workload(goodput=("ttft<=2s",), context_depths=(0, 16384))
    config = BenchConfig(concurrency=(64,), workload=workload)
    lines = format_table(BenchResult("u", "m", config, levels=[level])).splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    # Every figure is still there, each level's row in both parts.
    said = " ".join(lines)
    for shown in ("1234.5 ms", "12345.0 ms", "86.3 ms", "25.69", "1023.39", "93%", "64", "16k"):
        assert shown in said, (shown, lines)
    assert "-62.66 to 1410.92 ms" in said
    assert [line.split()[:2] for line in lines if "conc" in line] == [
        ["depth", "conc"],
        ["depth", "conc"],
    ]


def test_history_show_gives_what_a_benchmark_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    config = BenchConfig(concurrency=(64,), workload=Workload(prompt_tokens=512))
    run = History().record_bench(BenchResult("u", "m", config, levels=[_level()]))
    assert cli.main(["history", "show", run.id]) == 0
    out = capsys.readouterr().out
    assert "workload: prompt 512 tokens, output 128 tokens" in out
    assert "1234.5 ms" in out and "1023.39" in out, out

"""What `bench` prints beside a level run several times: each main figure's 95 % interval,
readable when its lower bound is negative (two repeats far apart give a wide t-interval)."""

from __future__ import annotations

from spark_tui.commands.bench import ci_text


def test_an_interval_reads_as_a_range_with_a_negative_lower_bound() -> None:
    said = ci_text({"ttft_p50_s": [-0.06266, 1.41092], "total_output_tps": [29.64, 36.08]})
    assert said == "TTFT p50 -62.66 to 1410.92 ms, tok/s 29.64 to 36.08"


def test_the_levels_table_fits_80_columns_in_two_parts_when_one_would_not() -> None:
    from spark_tui.commands.bench import format_table
    from spark_tui.core.workload import Workload
    from spark_tui.ops.bench import BenchConfig, BenchResult, LevelResult

    figures = {
        "ttft_p50_s": 1.2345, "ttft_p95_s": 12.345, "itl_mean_s": 0.0863, "itl_p95_s": 0.0918,
        "tps_per_request_mean": 25.69, "total_output_tps": 1023.39, "requests_per_s": 10.58,
        "goodput_rps": 10.58,
    }  # fmt: skip
    ci95 = {"ttft_p50_s": [-0.06266, 1.41092]}
    level = LevelResult(64, 1280, 0, 60.0, figures, ci95=ci95, context_depth=16384)
    level.metrics = {"kv_cache_usage_perc": {"max": 0.93}, "num_requests_running": {"max": 64}}
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

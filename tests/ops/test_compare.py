"""The comparison of two benchmarks and its noise rule."""

from __future__ import annotations

from typing import Any

from spark_tui.ops.compare import NOISE_FLOOR, compare_bench, noise_for
from spark_tui.ops.history import History, Run


def level(tps: float, ttft: float, latencies: list[float], **extra: Any) -> dict[str, Any]:
    return {
        "concurrency": 8,
        "requests": len(latencies),
        "errors": extra.pop("errors", 0),
        "duration_s": 1.0,
        "figures": {
            "total_output_tps": tps,
            "ttft_p50_s": ttft,
            "ttft_p95_s": ttft * 1.5,
            "errors": float(extra.pop("error_figure", 0.0)),
        },
        "per_request": {"latency_s": latencies, "ttft_s": [ttft] * len(latencies)},
        **extra,
    }


def bench_run(history: History, lv: dict[str, Any], settings: dict[str, Any]) -> Run:
    plan = {
        "recipe": "r",
        "settings": settings,
        "ranks": [{"rank": 0, "node": "a", "address": "127.0.0.1", "argv": ["vllm", "serve", "m"]}],
    }
    launch = history.record_launch(plan, settings)
    data = {"model": "m", "config": {"prompt_tokens": 8, "output_tokens": 8}, "levels": [lv]}
    return history.record_bench(data, launch=launch)


def test_doubling_throughput_is_beyond_noise_and_names_the_change() -> None:
    h = History()
    a = bench_run(h, level(100.0, 0.20, [1.0, 1.02, 0.98, 1.01]), {"max_num_seqs": 2})
    b = bench_run(h, level(200.0, 0.22, [0.5, 0.51, 0.49, 0.5]), {"max_num_seqs": 8})
    cmp = compare_bench(a, b)
    assert cmp.changed == [{"name": "max_num_seqs", "before": 2, "after": 8}]
    tps = cmp.get(8, "total_output_tps")
    assert tps is not None and tps.beyond_noise and tps.better is True
    assert round(tps.delta_pct, 6) == 100.0 and tps.delta == 100.0
    ttft = cmp.get(8, "ttft_p50_s")
    # +10 % with identical per-request TTFTs: only the floor applies, so it is beyond it.
    assert ttft is not None and ttft.noise_pct == NOISE_FLOOR * 100
    assert ttft.beyond_noise and ttft.better is False  # higher TTFT is worse


def test_spread_of_per_request_values_widens_the_noise() -> None:
    h = History()
    noisy = [0.5, 1.5, 0.7, 1.3]
    a = bench_run(h, level(100.0, 0.2, noisy), {})
    b = bench_run(h, level(110.0, 0.2, noisy), {})
    tps = compare_bench(a, b).get(8, "total_output_tps")
    assert tps is not None and not tps.beyond_noise and tps.better is None
    assert tps.noise_pct > 10.0


def test_repeats_set_the_noise_when_they_disagree_more() -> None:
    a = level(
        100.0, 0.2, [1.0, 1.0], repeats=[{"total_output_tps": 80.0}, {"total_output_tps": 120.0}]
    )
    b = level(115.0, 0.2, [1.0, 1.0])
    assert noise_for("total_output_tps", a, b) == 0.4  # (120 - 80) / 100
    assert noise_for("total_output_tps", b, b, [100.0, 106.0]) > NOISE_FLOOR


def test_any_new_error_is_reported() -> None:
    h = History()
    a = bench_run(h, level(100.0, 0.2, [1.0, 1.0]), {})
    b = bench_run(h, level(100.0, 0.2, [1.0, 1.0], errors=1, error_figure=1.0), {})
    err = compare_bench(a, b).get(8, "errors")
    assert err is not None and err.beyond_noise and err.better is False


def test_a_p95_resting_on_two_slow_requests_is_noisy() -> None:
    fast = [0.100 + 0.001 * i for i in range(14)]
    a = {"per_request": {"ttft_s": fast + [0.150, 0.200]}}
    b = {"per_request": {"ttft_s": fast + [0.140, 0.160]}}
    # The p95 interval spans the slowest requests: a 20 % move there is not a finding ...
    assert noise_for("ttft_p95_s", a, b) > 0.20
    # ... while the median of the same requests is tight: +-9 ms over 16 requests.
    assert noise_for("ttft_p50_s", a, b) < 0.07


def test_a_removed_setting_reads_as_none_in_the_comparison_and_the_report() -> None:
    from spark_tui.ops.export import markdown_report

    h = History()
    a = bench_run(h, level(100.0, 0.2, [1.0] * 4), {"tool_call_parser": "glm47", "eager": False})
    b = bench_run(h, level(100.0, 0.2, [1.0] * 4), {"tool_call_parser": None, "eager": True})
    cmp = compare_bench(a, b)
    text = cmp.changed_text()
    assert text == "tool_call_parser: glm47 -> none, eager: false -> true"
    assert f"changed: {text}" in cmp.to_text()
    report = markdown_report([b], cmp).splitlines()
    assert any("tool_call_parser=none, eager=true" in line for line in report)
    assert any("tool_call_parser: glm47 -> none, eager: false -> true" in line for line in report)


def test_the_launch_script_gives_a_removed_setting_as_the_cli_takes_it() -> None:
    from spark_tui.ops.export import launch_script

    h = History()
    plan = {"recipe": "r", "settings": {}, "ranks": []}
    run = h.record_launch(plan, {"tool_call_parser": None, "enforce_eager": True})
    script = launch_script(run)
    assert "--set tool_call_parser=none --set enforce_eager=true" in script

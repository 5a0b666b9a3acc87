"""What `bench` prints beside a level run several times: each main figure's 95 % interval,
readable when its lower bound is negative (two repeats far apart give a wide t-interval)."""

from __future__ import annotations

from spark_tui.commands.bench import ci_text


def test_an_interval_reads_as_a_range_with_a_negative_lower_bound() -> None:
    said = ci_text({"ttft_p50_s": [-0.06266, 1.41092], "total_output_tps": [29.64, 36.08]})
    assert said == "TTFT p50 -62.66 to 1410.92 ms, tok/s 29.64 to 36.08"

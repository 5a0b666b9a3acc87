"""A sweep's rules: targets and objectives as users write them, each value's verdict with
the figure that failed it, the best value, the table."""

from __future__ import annotations

import pytest

from spark_tui.core.errors import InputError
from spark_tui.core.sweep import (
    Eta,
    Objective,
    Target,
    best_of,
    default_objective,
    parse_sweep,
    verdict,
)
from spark_tui.core.sweep_result import MEASURED, NOT_STARTED, SweepResult, SweepRow, chart_points


def levels(ttft: float, tps: float, conc: int = 8) -> dict[int, dict[str, float | None]]:
    return {
        1: {"ttft_p95_s": 0.1, "total_output_tps": 10.0},
        conc: {"ttft_p95_s": ttft, "total_output_tps": tps},
    }


def test_targets_read_as_written() -> None:
    t = Target.parse("ttft_p95<=2s@c8")
    assert (t.figure, t.op, t.limit, t.concurrency) == ("ttft_p95_s", "<=", 2.0, 8)
    t = Target.parse(" itl_p95 < 80ms @c8")
    assert (t.figure, t.op, t.concurrency) == ("itl_p95_s", "<", 8)
    assert t.limit == pytest.approx(0.08)
    t = Target.parse("tok_s>=30")
    assert (t.figure, t.limit, t.concurrency) == ("total_output_tps", 30.0, None)
    assert Target.parse("ttft_p95<=2s@c8").text() == "ttft_p95<=2000 ms@c8"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ttft_p95<=2@c8", "without its unit"),
        ("tok_s>=30ms@c8", "not a time"),
        ("speed>=3@c8", "no benchmark figure"),
        ("ttft_p95=2s@c8", "cannot read"),
        ("ttft_p95<=2s@c0", "concurrency"),
        ("ttft_p95<=2s@c", "cannot read"),
    ],
)
def test_unreadable_targets_say_the_form(text: str, says: str) -> None:
    with pytest.raises(InputError) as caught:
        Target.parse(text)
    assert says in caught.value.message and caught.value.remedy


def test_objective_and_its_default() -> None:
    o = Objective.parse("tok_s@c8")
    assert (o.figure, o.maximize, o.concurrency) == ("total_output_tps", True, 8)
    o = Objective.parse("ttft_p95", maximize=False)
    assert o.level({1: {}, 4: {}}) == 4 and not o.maximize
    for bad in ("tok_s<=3", "tok_s@c0"):
        with pytest.raises(InputError):
            Objective.parse(bad)
    assert default_objective([Target.parse("ttft_p95<=2s@c4")]).concurrency == 4
    assert default_objective([]).concurrency is None


def test_sweep_values() -> None:
    assert parse_sweep("max-num-seqs=4, 8,16") == ("max_num_seqs", ("4", "8", "16"))
    for bad in ("max_num_seqs=4", "max_num_seqs=4,,8", "max_num_seqs"):
        with pytest.raises(InputError):
            parse_sweep(bad)


def test_verdict_names_the_figure_that_failed_and_the_best_meets_all() -> None:
    targets = [Target.parse("ttft_p95<=2s@c8")]
    objective = Objective.parse("tok_s@c8")
    slow = verdict(levels(2.5, 90.0), targets, objective)
    ok_low = verdict(levels(1.0, 40.0), targets, objective)
    ok_high = verdict(levels(1.9, 60.0), targets, objective)
    missing = verdict({1: {"ttft_p95_s": 0.1}}, targets, objective)
    assert not slow.meets and slow.text() == "fails: ttft_p95 2500 ms at c8 (target <= 2000 ms)"
    assert ok_low.meets and ok_high.meets and ok_high.objective == 60.0
    assert "not measured at c8" in missing.text()
    refused = verdict(None, targets, objective)
    assert refused.text() == "did not start" and not refused.meets
    # The fastest value fails the target: the best is the best of those that meet it.
    assert best_of([slow, ok_low, ok_high, refused], objective) == 2
    assert best_of([slow, refused], objective) is None
    lowest = Objective.parse("ttft_p95@c8", maximize=False)
    assert (
        best_of([verdict(levels(1.0, 1), [], lowest), verdict(levels(0.5, 1), [], lowest)], lowest)
        == 1
    )


def test_a_target_without_a_level_holds_at_every_level() -> None:
    target = Target.parse("ttft_p95<=500ms")
    assert [m.concurrency for m in target.check(levels(0.6, 1))] == [8]
    assert target.check(levels(0.4, 1)) == []


def sweep() -> SweepResult:
    result = SweepResult(
        recipe="glm-5.3-flash",
        setting="max_num_seqs",
        raws=["2", "8192", "8"],
        values=[2, 8192, 8],
        targets=[Target.parse("ttft_p95<=2s@c8")],
        objective=Objective.parse("tok_s@c8"),
        overrides={},
        baseline_value=4,
    )
    result.rows = [
        SweepRow(
            8,
            "8",
            MEASURED,
            levels=levels(1.5, 60.0),
            delta_pct=20.0,
            noise_pct=5.0,
            noise_verdict="better",
        ),
        SweepRow(
            8192,
            "8192",
            NOT_STARTED,
            reason="rank 0 failed: max_num_batched_tokens (4096) must be >= max_num_seqs",
            rank_lines={"rank 0 spark-a": ["ValueError: max_num_batched_tokens"]},
        ),
        SweepRow(
            2,
            "2",
            MEASURED,
            levels=levels(2.4, 30.0),
            delta_pct=-40.0,
            noise_pct=6.0,
            noise_verdict="worse",
        ),
    ]
    return result


def test_the_table_in_the_order_given_with_the_noise_and_the_reasons() -> None:
    result = sweep()
    assert [r.raw for r in result.ordered_rows()] == ["2", "8192", "8"]
    assert result.best() is result.rows[0]
    table = result.table()
    assert table[0] == ["max_num_seqs", "verdict", "tok_s@c8", "ttft_p95@c8", "vs base", "noise"]
    assert table[1] == ["2", "fails", "30.0", "2400 ms", "-40.0%!", "6.0%"]
    assert table[2][:2] == ["8192", "did not start"]
    assert table[3] == ["8", "meets", "60.0", "1500 ms", "+20.0%+", "5.0%"]
    text = result.text()
    assert "2: fails: ttft_p95 2400 ms at c8 (target <= 2000 ms)" in text
    assert "8192: did not start: rank 0 failed" in text
    assert "[rank 0 spark-a] ValueError: max_num_batched_tokens" in text
    assert "best: max_num_seqs=8 (60.0 tok_s@c8)" in text
    assert max(len(line) for line in text.splitlines()[2:6]) <= 80
    assert chart_points(result, "total_output_tps", 8) == [30.0, None, 60.0]


def test_the_record_round_trips_and_resume_knows_its_sweep() -> None:
    result = sweep()
    again = SweepResult.from_dict(result.to_dict())
    assert again.table() == result.table() and again.same_sweep(result)
    assert result.to_dict()["best"] == 8 and result.to_dict()["rows"][1]["meets"] is False
    assert result.left() == [] and SweepResult.from_dict(
        {**result.to_dict(), "rows": []}
    ).left() == [0, 1, 2]
    other = SweepResult.from_dict({**result.to_dict(), "raws": ["2", "8"]})
    assert not other.same_sweep(result)


def test_two_values_within_noise_are_said_to_be() -> None:
    result = sweep()
    result.rows[2] = SweepRow(2, "2", MEASURED, levels=levels(1.0, 58.0), noise_pct=5.0)
    assert "within noise of 2" in result.best_text()


def test_time_left() -> None:
    eta = Eta()
    assert eta.left(3) is None
    eta.durations += [60.0, 80.0]
    assert eta.left(2) == 140.0 and eta.left(2, 30.0) == 110.0 and eta.left(0) is None

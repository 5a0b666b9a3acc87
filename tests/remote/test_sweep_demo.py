"""The sweep through the service on the demo's simulated Sparks: max_num_seqs 2, 16384, 8
with the recipe's max_num_batched_tokens removed, where vLLM refuses 16384 at startup (above
the 8192 tokens it budgets on a GB10 when the command gives none, which the fit check cannot
know) and the sweep goes on; interrupted after its first value, resumed without measuring it
again, the best value left running and made the baseline. A value the fit check refuses is
a row with the check's reason, and the cluster running before it goes on serving."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.sweep import Objective, Target
from spark_tui.ops.bench import BenchConfig
from spark_tui.service import events as ev
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.demo_session import DemoSession

CONFIG = BenchConfig(concurrency=(2,), prompt_tokens=16, output_tokens=8, requests_per_level=4)


async def drain(events, stop_after_value: bool = False) -> list:
    seen = []
    async with contextlib.aclosing(events):
        async for event in events:
            if isinstance(event, ev.Question):
                event.reply(True)
            seen.append(event)
            if stop_after_value and isinstance(event, ev.SweepValueDone):
                break  # the consumer goes away: the sweep's work is cancelled (an interrupt)
    return seen


async def test_sweep_refused_value_interrupt_resume_apply_best(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    session = DemoSession(
        pace=0.05, token_scale=0.05, base_address=random_loopback_base(), bench_config=CONFIG
    )
    recipe = find_recipe("glm-5.3-flash")
    targets = [Target.parse("errors<=0@c2")]
    objective = Objective.parse("tok_s@c2")
    values = ["2", "16384", "8"]
    try:
        await session.start()
        await drain(session.launch(recipe, {"max_num_batched_tokens": "none"}, follow=False))
        first = await drain(
            session.sweep(recipe, "max_num_seqs", values, targets, objective),
            stop_after_value=True,
        )
        history = session.history
        (record,) = history.list_runs("sweep")
        kept = record.results["sweep"]
        assert kept["interrupted"] and [r["raw"] for r in kept["rows"]] == ["2"]
        assert any(isinstance(e, ev.SweepProgressed) and e.phase == "bench" for e in first)
        launches = len(history.list_runs("launch"))

        seen = await drain(
            session.sweep(
                recipe, "max_num_seqs", values, targets, objective, resume=True, apply_best=True
            )
        )
    finally:
        await session.close()
    done = [e for e in seen if isinstance(e, ev.SweepDone)]
    assert len(done) == 1
    result = done[0].result
    assert result.run_id == record.id, "resumed in the same record"
    rows = {r.raw: r for r in result.ordered_rows()}
    refused = rows["16384"]
    assert refused.status == "did not start" and refused.launch_id is None
    lines = " ".join(sum(refused.rank_lines.values(), []))
    # The ranks' own refusal, in their lines: no fit check said it before the launch.
    assert "max_num_batched_tokens (8192) must be greater than or equal to max_num_seqs " in (
        lines
    ), refused
    assert "does not fit" not in (refused.reason or ""), refused
    assert rows["2"].measured and rows["8"].measured
    # Resumed: value 2 was not launched again (16384's and 8's launches, then none to leave
    # the best running when it is the last one measured).
    progressed = [e.value for e in seen if isinstance(e, ev.SweepProgressed) and e.value]
    assert 2 not in progressed and {16384, 8} <= set(progressed)
    assert any(e.eta_s is not None for e in seen if isinstance(e, ev.SweepProgressed))
    best = result.best()
    assert best is not None and best.raw in ("2", "8")
    history = session.history
    assert len(history.list_runs("launch")) in (launches + 2, launches + 3)
    # The best value runs and is the baseline now.
    pinned = history.pinned_baseline(recipe.name, history.get_run(best.bench_id or "").cluster_key)
    assert pinned is not None and pinned.id == best.bench_id
    assert history.list_runs("launch")[-1].settings["max_num_seqs"] == best.value


@pytest.mark.parametrize(
    ("setting", "raw", "why"),
    [
        # gpu_memory_utilization 0.05 leaves no room for the weights on a 128 GB Spark.
        ("gpu_memory_utilization", "0.05", "does not fit"),
        # Above the recipe's max_num_batched_tokens of 4096: vLLM's SchedulerConfig refuses.
        (
            "max_num_seqs",
            "8192",
            "max_num_batched_tokens (4096) must be greater than or equal to max_num_seqs (8192)",
        ),
    ],
)
async def test_a_value_the_fit_check_refuses_is_a_row_not_a_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, raw: str, why: str
) -> None:
    # An unattended sweep must not stop at "launch anyway?", nor stop the running cluster
    # for a value that will not be launched.
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    session = DemoSession(
        pace=0.05, token_scale=0.05, base_address=random_loopback_base(), bench_config=CONFIG
    )
    recipe = find_recipe("glm-5.3-flash")
    try:
        await session.start()
        await drain(session.launch(recipe, {}, follow=False))
        running = session.cluster
        assert running is not None and running.ready
        launches = len(session.history.list_runs("launch"))
        seen = await drain(session.sweep(recipe, setting, [raw], [], Objective.parse("tok_s@c2")))
        after = session.cluster
        assert after is not None and after.cluster_id == running.cluster_id and after.ready
        assert running.launch_run is not None and after.launch_run is not None
        assert after.launch_run.id == running.launch_run.id, "the cluster was not relaunched"
        assert len(session.history.list_runs("launch")) == launches
        serving = {c.cluster_id: len(c.ranks) for c in await session.nodes.status()}
    finally:
        await session.close()
    assert serving == {running.cluster_id: 2}, "its ranks still run on the nodes"
    assert not [e for e in seen if isinstance(e, ev.Question) and e.kind == ev.INSIST]
    notices = [e.message for e in seen if isinstance(e, ev.Notice)]
    assert not [m for m in notices if "stopping" in m or "replacing" in m], notices
    (done,) = [e for e in seen if isinstance(e, ev.SweepDone)]
    (row,) = done.result.ordered_rows()
    assert row.status == "did not start" and why in (row.reason or ""), row
    assert row.launch_id is None and not row.rank_lines, row

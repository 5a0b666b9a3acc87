"""A sweep interrupted after its first value and resumed as `tune --sweep ... --resume`
without repeating `--target`: the values are judged by the sweep's own targets, so a value
that failed them before does not pass after the resume (a real Session over SIMULATED
Sparks)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.sweep import Target
from spark_tui.core.workload import Workload
from spark_tui.ops.bench import BenchConfig
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.service.ssh_nodes import SshNodes
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base

CONFIG = BenchConfig(
    concurrency=(2,), workload=Workload(prompt_tokens=16, output_tokens=4), requests_per_level=2
)
# No simulated Spark makes a million tokens a second: every value fails this target.
UNREACHABLE = Target.parse("tok_s>=1000000@c2")
VALUES = ["2", "8"]


async def drain(events: Any, stop_after_value: bool = False) -> list[Any]:
    seen = []
    async with contextlib.aclosing(events):
        async for event in events:
            if isinstance(event, ev.Question):
                event.reply(True)
            seen.append(event)
            if stop_after_value and isinstance(event, ev.SweepValueDone):
                break  # the consumer goes away: the sweep is cancelled (an interrupt)
    return seen


async def test_a_resume_without_targets_keeps_the_sweeps_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    scenario = Scenario(
        nodes=2, pace=0.05, token_scale=0.05, ssh_port=0, base_address=random_loopback_base(2)
    )
    async with SimCluster(scenario) as sim:
        session = Session(sim.inventory, nodes=SshNodes(sim.inventory), bench_config=CONFIG)
        seen = await _interrupted_then_resumed(session)
    (done,) = [e.result for e in seen if isinstance(e, ev.SweepDone)]
    assert [r.raw for r in done.ordered_rows()] == VALUES
    assert all(r.measured for r in done.ordered_rows()), done.text()
    assert done.targets == [UNREACHABLE]
    assert done.best() is None, done.text()
    notices = [e.message for e in seen if isinstance(e, ev.Notice)]
    assert any("resuming sweep" in m and "judged as before" in m for m in notices), notices
    # Each relaunch names the setting it changes, not a bare value.
    assert "relaunching with max_num_seqs=8" in notices, notices


async def _interrupted_then_resumed(session: Session) -> list[Any]:
    recipe = find_recipe("glm-5.3-flash")
    try:
        await drain(session.launch(recipe, {"max_num_seqs": "4"}, follow=False))
        kept: list[Any] = []
        sweep = session.sweep(recipe, "max_num_seqs", VALUES, [UNREACHABLE], on_result=kept.append)
        await drain(sweep, stop_after_value=True)
        # As `tune` does after Ctrl+C: the baseline's settings left running.
        await drain(session.leave_after_sweep(recipe, kept[-1], "baseline"))
        return await drain(session.sweep(recipe, "max_num_seqs", VALUES, resume=True))
    finally:
        await session.close()

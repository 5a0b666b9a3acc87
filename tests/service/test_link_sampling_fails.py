"""A benchmark whose link and memory sampling fails (a node does not answer at the start)
still measures and records the API: the failure is a warning with its remedy, and the result
has no link figures rather than made-up ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine_session import EngineNodes, EngineSession

from spark_tui.core.errors import UnreachableError
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.bench import BenchConfig
from spark_tui.service import events as ev


class SilentNodes(EngineNodes):
    """Engines that answer; nodes whose sampling fails."""

    async def sample_link(self, cluster_id: str | None, emit: Any, **kw: Any) -> None:
        raise UnreachableError("sim-spark-2: no answer over SSH", "check the node's network")


async def test_bench_keeps_its_figures_when_sampling_fails(
    tmp_path: Path, private_data_dir: Path
) -> None:
    config = BenchConfig(concurrency=(2,), prompt_tokens=16, output_tokens=8, requests_per_level=4)
    session = EngineSession(
        tmp_path / "sim", nodes=SilentNodes(tmp_path / "sim"), bench_config=config
    )
    try:
        async for event in session.launch(find_recipe("glm-5.3-flash"), {}, follow=False):
            if isinstance(event, ev.Question):
                event.reply(True)
        seen = [e async for e in session.bench()]
    finally:
        await session.close()
    done = next(e for e in seen if isinstance(e, ev.BenchDone))
    assert done.result.levels and done.result.levels[0].errors == 0
    assert done.result.link == [] and done.result.memory == []
    (warning,) = [e for e in seen if isinstance(e, ev.Notice) and "not sampled" in e.message]
    assert warning.level == "warning" and "sim-spark-2: no answer over SSH" in warning.message
    assert warning.remedy == "check the node's network"
    assert session.history.get_run(done.run_id or "").results["bench"]["link"] == []

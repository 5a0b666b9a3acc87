"""A tune interrupted once it stopped the running cluster, through the service on the
demo's simulated Sparks: the tune said which settings it replaced, and the interface's
restore brings them back (the same cluster, the settings it ran with)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.bench import BenchConfig
from spark_tui.service import events as ev
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.demo_session import DemoSession

CONFIG = BenchConfig(concurrency=(2,), prompt_tokens=16, output_tokens=8, requests_per_level=4)


async def drain(events, until: type | None = None) -> list:  # type: ignore[no-untyped-def]
    seen = []
    async with contextlib.aclosing(events):
        async for event in events:
            if isinstance(event, ev.Question):
                event.reply(True)
            seen.append(event)
            if until is not None and isinstance(event, until):
                break  # the consumer goes away: the action's work is cancelled (an interrupt)
    return seen


async def test_an_interrupted_relaunch_is_restored_with_the_settings_it_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    session = DemoSession(
        pace=0.05, token_scale=0.05, base_address=random_loopback_base(), bench_config=CONFIG
    )
    recipe = find_recipe("glm-5.3-flash")
    try:
        await session.start()
        await drain(session.launch(recipe, {"max_num_seqs": "2"}, follow=False))
        first = session.cluster
        assert first is not None and first.ready
        seen = await drain(
            session.tune(recipe, "max_num_seqs", "8", follow=False), until=ev.TuneReplaced
        )
        (replaced,) = [e for e in seen if isinstance(e, ev.TuneReplaced)]
        assert replaced.cluster_id == first.cluster_id and replaced.change == "max_num_seqs=8"
        assert replaced.overrides == {"max_num_seqs": "2"}
        # The change was checked before the stop (its verdict came first).
        kinds = [type(e) for e in seen]
        assert kinds.index(ev.Evaluated) < kinds.index(ev.Stopped)
        assert not [c for c in await session.nodes.status() if c.running]

        back = await drain(session.restore_after_tune(recipe, replaced, "interrupted"))
        (restored,) = [e for e in back if isinstance(e, ev.TuneRestored)]
        assert restored.cluster_id == first.cluster_id and restored.reason == "interrupted"
        cluster = session.cluster
        assert cluster is not None and cluster.ready
        assert cluster.overrides == {"max_num_seqs": "2"}
        (running,) = [c for c in await session.nodes.status() if c.running]
        assert running.cluster_id == first.cluster_id
        for rank in running.ranks:
            argv = [str(a) for a in rank.command]
            assert argv[argv.index("--max-num-seqs") + 1] == "2", argv
    finally:
        await session.close()

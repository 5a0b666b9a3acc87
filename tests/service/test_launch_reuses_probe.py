"""A launch acts on the facts of a probe the session has just made (the cockpit's discovery
or refresh, which its fit panel shows) instead of probing the nodes again; after anything
that changed the nodes (a launch, a stop), or with a rank of ours on them, it probes again.
Real Session over simulated Sparks; the probes are counted at the probe's public seam."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.remote import probe as probe_module
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base


@pytest.fixture
def probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per probe of the nodes."""
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    seen: list[int] = []
    probe = probe_module.probe_pool

    async def counted(*a: Any, **kw: Any) -> Any:
        seen.append(1)
        return await probe(*a, **kw)

    monkeypatch.setattr(probe_module, "probe_pool", counted)
    return seen


async def launched(session: Session, recipe: Any) -> list[Any]:
    """A launch until every rank has started (not followed to ready)."""
    events = []
    async for event in session.launch(recipe, {}, insist=True, wait_ready=False, follow=False):
        if isinstance(event, ev.Question):
            event.reply(True)
        events.append(event)
    return events


async def test_a_launch_right_after_discovery_does_not_probe_again(probes: list[int]) -> None:
    recipe = find_recipe("glm-5.3-flash")
    scenario = Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(), pace=0.02)
    async with SimCluster(scenario) as sim:
        session = Session(sim.inventory)
        try:
            async for _event in session.discover():
                pass
            assert probes == [1]
            shown = session.evaluate(recipe, {})  # what the fit panel shows
            assert session.facts_fresh()
            assert not session.facts_fresh(max_age=0)  # older than that: probed again
            first = await launched(session, recipe)
            reused = len(probes)
            # Ranks started: the nodes changed, so nothing probed before is reused.
            assert not session.facts_fresh()
            async for _event in session.stop():
                pass
            second = await launched(session, recipe)
            again = len(probes)
            # Probed with a rank of ours on the nodes: their memory frees when it ends.
            async for _event in session.probe():
                pass
            with_ranks = session.facts_fresh()
        finally:
            await session.close()
    assert reused == 1, "the launch probed again right after the discovery"
    evaluated = next(e for e in first if isinstance(e, ev.Evaluated)).evaluation
    assert evaluated.verdict == shown.verdict and evaluated.plan == shown.plan
    assert not any(isinstance(e, ev.Probed) for e in first)
    assert any(isinstance(e, ev.RankStateChanged) for e in first)
    assert again == 2, "a launch after a stop probes again"
    assert any(isinstance(e, ev.Probed) for e in second)
    assert not with_ranks

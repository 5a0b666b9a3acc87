"""A launch holds its image's flag check (`vllm serve --help=all` in a container on the head)
from its beginning until its ranks have started, not only while they are made: a headless
launch begins the table's build as soon as it has connected, and a help container started
while the nodes were probed made the head's start wait for it in dockerd. The hold ends
however the launch ends: a launch refused before any rank leaves no help container behind.
Real Session over simulated Sparks; the Docker calls are recorded at their public seam, and
the probe waits until the help container has been made (so a help run not held starts then).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.errors import OperationFailed
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.image_flags import FLAG_TABLE_ROLE, HELP_CALL, HELP_CREATE
from spark_tui.remote import probe as probe_module
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base

ROLE = "spark-tui.role"


class Calls:
    """Every Docker call's name, in the order they ended; `made` is set once the help
    container has been made."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ended: list[str] = []
        self.made = asyncio.Event()
        call = RemoteDocker.call

        async def called(docker: Any, fn: Any, what: str) -> Any:
            out = await call(docker, fn, what)
            self.ended.append(what)
            if what == HELP_CREATE:
                self.made.set()
            return out

        monkeypatch.setattr(RemoteDocker, "call", called)
        probe = probe_module.probe_pool

        async def probing(*a: Any, **kw: Any) -> Any:
            # The probe ends only once the help container exists and the help run has had
            # every chance to start (loop turns, not time).
            facts = await probe(*a, **kw)
            await asyncio.wait_for(self.made.wait(), 60)
            for _ in range(100):
                await asyncio.sleep(0)
            return facts

        monkeypatch.setattr(probe_module, "probe_pool", probing)


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Calls:
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))  # a first launch
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    return Calls(monkeypatch)


def scenario() -> Scenario:
    return Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(), pace=0.02)


async def test_the_help_container_starts_after_every_rank_of_a_headless_launch(
    calls: Calls,
) -> None:
    recipe = find_recipe("glm-5.3-flash")
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)
        try:
            async for event in session.launch(
                recipe, {}, insist=True, wait_ready=False, follow=False
            ):
                if isinstance(event, ev.Question):
                    event.reply(True)
            cluster = session.cluster
            assert cluster is not None and cluster.plan is not None
            ranks = [f"start {r.container.name}" for r in cluster.plan.ranks]
            async for _event in session.stop():
                pass
        finally:
            await session.close()
    assert HELP_CALL in calls.ended, calls.ended
    assert all(r in calls.ended for r in ranks), calls.ended
    help_started = calls.ended.index(HELP_CALL)
    assert all(calls.ended.index(r) < help_started for r in ranks), calls.ended


async def test_a_launch_refused_before_its_ranks_leaves_no_help_container(
    calls: Calls,
) -> None:
    recipe = find_recipe("glm-5.3-flash")
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)
        try:
            with pytest.raises(OperationFailed) as refused:
                # The fit check's question answered no (no terminal to insist): refused
                # after the help container was made and held.
                async for event in session.launch(recipe, {"gpu_memory_utilization": 0.05}):
                    if isinstance(event, ev.Question):
                        event.reply(False)
        finally:
            await session.close()
        left = {
            n.name: [
                c.name
                for c in sim.node(n.name).engine.containers.values()
                if c.labels.get(ROLE) == FLAG_TABLE_ROLE
            ]
            for n in sim.inventory
        }
    assert "not launching" in refused.value.message, refused.value.message
    assert HELP_CREATE in calls.ended, "the help container was made before the refusal"
    assert left == {n.name: [] for n in sim.inventory}, left


async def test_a_launch_on_fewer_nodes_is_not_held_by_its_own_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three nodes, a two-rank recipe: the table's build begun at connect belongs to the
    # cluster of every node, so the launch (a cluster of two) waits for that build's help
    # run before its ranks; the launch's hold must not hold a run it waits for itself.
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    recipe = find_recipe("glm-5.3-flash")
    three = Scenario(nodes=3, ssh_port=0, base_address=random_loopback_base(3), pace=0.02)
    started: list[int] = []

    async def launched(session: Session) -> None:
        async for event in session.launch(recipe, {}, insist=True, wait_ready=False, follow=False):
            if isinstance(event, ev.Question):
                event.reply(True)
            if isinstance(event, ev.RankStateChanged) and event.state is ev.RankState.STARTING:
                started.append(event.rank)

    async with SimCluster(three) as sim:
        session = Session(sim.inventory)
        try:
            # Generous: only a launch waiting for its own held help run never ends.
            await asyncio.wait_for(launched(session), 120)
            cluster = session.cluster
            assert cluster is not None and cluster.plan is not None
            assert len(cluster.plan.ranks) == 2
            async for _event in session.stop():
                pass
        finally:
            await session.close()
    assert sorted(started) == [0, 1]

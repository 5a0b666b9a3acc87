"""A first launch of an image does not wait for the image's `vllm serve --help=all`: its
ranks start beside it, and the help run's container is the launch's own. Real Session over
simulated Sparks (their dockerd runs the stand-in engine, which answers --help=all); the
help run is held until the test lets it go, so the ranks are surely started beside it.

- The table then names a flag the image's vLLM does not know: the ranks are stopped and
  removed, the launch is refused with the check's own words and remedy, and no container
  (the help run's included) is left.
- The same when the help run's container is still being made as the ranks start (making
  one of a large image took a second on a busy head: the launch does not wait for it).
- An interrupt while the help run is held leaves no container either.
- The help container carries the cluster's labels: `stop` of the cluster removes it,
  `status` does not take it for a rank.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.errors import OperationFailed
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.image_flags import (
    FLAG_TABLE_ROLE,
    HELP_CALL,
    HELP_CREATE,
    help_container_name,
)
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base

ROLE = "spark-tui.role"


class HeldHelp:
    """Holds every `vllm serve --help=all` run (its container made, not started) until
    `release` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()  # a run is held (its container made)
        self.runs = 0
        call = RemoteDocker.call
        self.what = HELP_CALL

        async def called(docker: Any, fn: Any, what: str) -> Any:
            if what == self.what:
                self.runs += 1
                self.entered.set()
                await self.release.wait()
            return await call(docker, fn, what)

        monkeypatch.setattr(RemoteDocker, "call", called)


@pytest.fixture
def first_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldHelp]:
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))  # no table kept yet
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    yield HeldHelp(monkeypatch)


def misspelt() -> Any:
    recipe = find_recipe("glm-5.3-flash")
    return dataclasses.replace(
        recipe, command=recipe.command.rstrip() + " --enable-prefix-cachin\n"
    )


def containers(sim: SimCluster) -> dict[str, list[tuple[str, str | None]]]:
    """Every container on every simulated node: (name, role label)."""
    return {
        n.name: [(c.name, c.labels.get(ROLE)) for c in sim.node(n.name).engine.containers.values()]
        for n in sim.inventory
    }


def scenario() -> Scenario:
    return Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(), pace=0.02)


async def test_a_misspelt_flag_on_a_first_launch_stops_the_ranks_in_the_checks_words(
    first_launch: HeldHelp,
) -> None:
    recipe = misspelt()
    seen: list[Any] = []
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)
        try:
            with pytest.raises(OperationFailed) as beside:
                async for event in session.launch(recipe, {}, insist=True, follow=False):
                    seen.append(event)
                    if isinstance(event, ev.Question):
                        event.reply(True)
                    if isinstance(event, ev.RankStateChanged):
                        if event.state is ev.RankState.STARTING:
                            # Started beside the held help run, in a container of its own
                            # that is this cluster's (made beside the ranks).
                            await first_launch.entered.wait()
                            head = containers(sim)[sim.inventory[0].name]
                            assert (help_name(session), FLAG_TABLE_ROLE) in head, head
                            first_launch.release.set()
            left = containers(sim)
            # The table is kept now: a second launch is refused before any container.
            with pytest.raises(OperationFailed) as before:
                async for event in session.launch(recipe, {}, insist=True, follow=False):
                    if isinstance(event, ev.Question):
                        event.reply(True)
                    assert not isinstance(event, ev.RankStateChanged), event
        finally:
            await session.close()
    assert any(isinstance(e, ev.RankStateChanged) for e in seen), "the ranks started"
    assert left == {n.name: [] for n in sim.inventory}, left
    image = recipe.container
    said = beside.value.message
    assert said.startswith(
        f"launch of {recipe.name} refused (its ranks, started while the image's flags were "
        "read, were stopped and removed): "
    ), said
    assert f"--enable-prefix-cachin is not a flag of the vLLM in {image}" in said
    # The same words and remedy as the check before any container gives.
    assert before.value.message.startswith(
        f"launch of {recipe.name} refused before any container was created: "
    )
    assert said.split(": ", 1)[1] == before.value.message.split(": ", 1)[1]
    assert beside.value.remedy == before.value.remedy
    assert "did you mean --enable-prefix-caching?" in said + beside.value.remedy
    assert first_launch.runs == 1


async def test_the_ranks_start_while_the_help_container_is_being_made(
    first_launch: HeldHelp,
) -> None:
    first_launch.what = HELP_CREATE  # held before Docker makes it
    recipe = misspelt()
    starting: set[int] = set()
    held_when_started = False
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)

        async def let_go_later() -> None:
            # Only the code this test guards against waits for the container before the
            # ranks: let it go after a while, so that such code fails the test, not hangs.
            await asyncio.sleep(60)
            first_launch.release.set()

        fallback = asyncio.ensure_future(let_go_later())
        try:
            with pytest.raises(OperationFailed) as refused:
                async for event in session.launch(recipe, {}, insist=True, follow=False):
                    if isinstance(event, ev.Question):
                        event.reply(True)
                    if (
                        isinstance(event, ev.RankStateChanged)
                        and event.state is ev.RankState.STARTING
                    ):
                        starting.add(event.rank)
                        if len(starting) == 2:
                            held_when_started = not first_launch.release.is_set()
                            first_launch.release.set()
            left = containers(sim)
        finally:
            fallback.cancel()
            await session.close()
    assert first_launch.runs == 1
    assert held_when_started, "the ranks waited for the help run's container to be made"
    # Then the table refused the flag: the ranks and the help container are gone.
    assert left == {n.name: [] for n in sim.inventory}, left
    assert refused.value.message.startswith(
        f"launch of {recipe.name} refused (its ranks, started while the image's flags were "
        "read, were stopped and removed): "
    ), refused.value.message
    assert "--enable-prefix-cachin is not a flag of the vLLM in" in refused.value.message


def help_name(session: Session) -> str:
    cluster = session.cluster
    assert cluster is not None
    return help_container_name(cluster.cluster_id)


async def test_an_interrupt_during_a_first_launch_leaves_no_help_container(
    first_launch: HeldHelp,
) -> None:
    recipe = find_recipe("glm-5.3-flash")
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)
        started = asyncio.Event()

        async def consume() -> None:
            async for event in session.launch(recipe, {}, insist=True, follow=False):
                if isinstance(event, ev.Question):
                    event.reply(True)
                if isinstance(event, ev.RankStateChanged) and event.state is ev.RankState.STARTING:
                    started.set()

        try:
            task = asyncio.ensure_future(consume())
            await asyncio.wait(
                {task, asyncio.ensure_future(started.wait())}, return_when="FIRST_COMPLETED"
            )
            assert not task.done(), task
            head = sim.inventory[0].name
            assert (help_name(session), FLAG_TABLE_ROLE) in containers(sim)[head]
            # Not a rank: status lists the cluster's ranks only.
            (found,) = await session.nodes.status()
            assert all(r.rank >= 0 for r in found.ranks), found.ranks
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            left = containers(sim)
        finally:
            await session.close()
    assert left == {n.name: [] for n in sim.inventory}, left


async def test_stop_of_the_cluster_removes_its_help_container(first_launch: HeldHelp) -> None:
    recipe = find_recipe("glm-5.3-flash")
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)
        try:
            async for _event in session.discover():
                pass
            evaluation = session.evaluate(recipe, {})
            assert evaluation.plan is not None
            plan = evaluation.plan
            # What the cockpit does once the recipe is shown: the table in the background.
            session.start_flag_table(recipe, {})
            name = help_container_name(plan.cluster_id)
            head = plan.head.node
            await first_launch.entered.wait()
            assert (name, FLAG_TABLE_ROLE) in containers(sim)[head], containers(sim)
            assert await session.nodes.status() == []
            report = await session.nodes.stop(plan.cluster_id, None)
            assert (head, name) in report.removed, report
            left = containers(sim)
        finally:
            await session.close()
    assert left == {n.name: [] for n in sim.inventory}, left


async def test_replacing_the_same_cluster_keeps_the_new_launchs_flag_check(
    first_launch: HeldHelp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same recipe on the same nodes is the same cluster id: stopping the running one
    # (--replace) must not take the new launch's help run with it, which left the launch
    # to go on with its flags "not checked".
    first_launch.release.set()
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)
        try:
            async for event in session.launch(
                find_recipe("glm-5.3-flash"), {}, insist=True, follow=False
            ):
                if isinstance(event, ev.Question):
                    event.reply(True)
            running = session.cluster
            assert running is not None and running.ready
            # A new image (its table not kept yet), a misspelt flag, the same cluster.
            monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "new-image-cache"))
            first_launch.release.clear()
            first_launch.entered.clear()
            recipe = misspelt()
            planned = session.evaluate(recipe, {}).plan
            assert planned is not None and planned.cluster_id == running.cluster_id
            with pytest.raises(OperationFailed) as refused:
                async for event in session.launch(
                    recipe, {}, insist=True, replace=True, follow=False
                ):
                    if isinstance(event, ev.Question):
                        event.reply(True)
                    if (
                        isinstance(event, ev.RankStateChanged)
                        and event.state is ev.RankState.STARTING
                    ):
                        first_launch.release.set()
            left = containers(sim)
        finally:
            await session.close()
    said = refused.value.message
    assert "--enable-prefix-cachin is not a flag of the vLLM in" in said, said
    assert left == {n.name: [] for n in sim.inventory}, left

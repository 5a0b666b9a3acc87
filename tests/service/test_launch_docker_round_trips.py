"""The Docker round trips before a launch's first container: its status and its ranks reuse
the Docker client its probe opened on each node (each open is a socket forward and a ping,
one after the other before the head's container), and the probe asks a node's images and
our containers at once. Real Session over simulated Sparks; the calls are recorded at
RemoteDocker's public seams."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base


def scenario() -> Scenario:
    return Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(), pace=0.02)


@pytest.fixture(autouse=True)
def _dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))


async def launch_then_stop(session: Session, opened: list[str]) -> list[str]:
    """The nodes Docker was opened on by the launch (then its ranks are removed)."""
    recipe = find_recipe("glm-5.3-flash")
    async for event in session.launch(recipe, {}, insist=True, wait_ready=False, follow=False):
        if isinstance(event, ev.Question):
            event.reply(True)
    by_launch = list(opened)
    async for _event in session.stop():
        pass
    return by_launch


async def test_a_launch_opens_docker_on_each_node_once(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    open_ = RemoteDocker.open.__func__  # type: ignore[attr-defined]

    async def opening(cls: type[RemoteDocker], conn: Any, timeout: float = 60.0) -> RemoteDocker:
        opened.append(conn.name)
        return await open_(cls, conn, timeout)

    monkeypatch.setattr(RemoteDocker, "open", classmethod(opening))
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)
        try:
            by_launch = await launch_then_stop(session, opened)
        finally:
            await session.close()
        head = sim.inventory[0].name
    # The probe's client on each node, and the image's flag check's own on the head
    # (it runs beside the ranks over a connection of its own).
    assert sorted(by_launch) == sorted([n.name for n in sim.inventory] + [head]), by_launch


async def test_the_probe_asks_the_images_and_our_containers_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: dict[str, asyncio.Event] = {}
    images, containers = RemoteDocker.images, RemoteDocker.containers

    async def listing_images(docker: RemoteDocker) -> Any:
        # Answers only once our containers were asked for too (a probe that waits for the
        # images first never asks: this then fails after a generous minute).
        await asyncio.wait_for(asked.setdefault(docker.node, asyncio.Event()).wait(), 60)
        return await images(docker)

    async def listing_containers(docker: RemoteDocker, *a: Any, **kw: Any) -> Any:
        asked.setdefault(docker.node, asyncio.Event()).set()
        return await containers(docker, *a, **kw)

    monkeypatch.setattr(RemoteDocker, "images", listing_images)
    monkeypatch.setattr(RemoteDocker, "containers", listing_containers)
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)
        try:
            async for event in session.probe():
                if isinstance(event, ev.Probed):
                    assert event.errors == {}, event.errors
                    assert all(n.images for n in event.nodes), "every node's images listed"
        finally:
            await session.close()

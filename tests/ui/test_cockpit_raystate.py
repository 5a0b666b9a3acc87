"""The Ray cluster's state in the cockpit while a vllm-ray launch forms: nodes joined of those
expected and the resources, from the launch's RayClusterState events; gone at the stop.

The real app and its launch action on a vllm-ray recipe (a user recipe, planned by the
product on the recorded simulated nodes); the session's launch seam replays the Ray states
a real formation emits (TEST DOUBLE, see cockpit_replay) and waits between them for the test.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import yaml
from cockpit_helpers import plain, wait_until
from cockpit_replay import ReplayNodes, ReplaySession

from spark_tui.ops.events import (
    ClusterEvent,
    ClusterReady,
    Emit,
    RankState,
    RankStateChanged,
    RayClusterState,
)
from spark_tui.ui.app import SparkApp
from spark_tui.ui.screens.dialogs import Dialog
from spark_tui.ui.widgets.raystate import RayStatePanel

RECIPE = "ray-sim-tp2"
GIB = 1024**3
HEAD_ONLY = {"CPU": 20.0, "memory": 94.5 * GIB, "object_store_memory": 40.5 * GIB, "GPU": 1.0}
BOTH = {"CPU": 40.0, "memory": 189.0 * GIB, "object_store_memory": 81.0 * GIB, "GPU": 2.0}


def write_ray_recipe() -> None:
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui" / "recipes"
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "recipe_version": "2",
        "name": RECIPE,
        "model": "nvidia/GLM-5.3-Flash-FP4-Local",
        "runtime": "vllm-ray",
        "container": "eugr/spark-vllm-b12x:nightly-20261015",
        "defaults": {"port": 8000, "tensor_parallel": 2},
        "command": "vllm serve {model} --port {port} -tp {tensor_parallel}",
    }
    (folder / f"{RECIPE}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


class RayReplay(ReplayNodes):
    """A launch whose Ray cluster forms one node at a time, each step when the test says."""

    def __init__(self) -> None:
        super().__init__()
        self.step = asyncio.Event()
        self.plan_ranks = 0

    async def launch(
        self, plan: Any, replace_stale: Any, *, emit: Emit[ClusterEvent], **kw: Any
    ) -> None:
        self.launched = plan
        self.plan_ranks = len(plan.ranks)
        assert plan.serve_exec is not None, "a vllm-ray plan"
        for r in plan.ranks:
            emit(RankStateChanged(r.rank, r.node, RankState.CREATED))
        for joined, resources, formed in ((1, HEAD_ONLY, False), (2, BOTH, True)):
            await self.step.wait()
            self.step.clear()
            emit(RayClusterState(plan.cluster_id, joined, len(plan.ranks), resources, formed))
        await self.step.wait()
        for r in plan.ranks:
            emit(RankStateChanged(r.rank, r.node, RankState.READY))
        emit(ClusterReady(plan.cluster_id, "http://127.0.0.1:18000"))
        await asyncio.Event().wait()


def ray_line(app: SparkApp) -> str:
    panels = app.main.query(RayStatePanel)
    if not panels or not panels.first().has_class("-shown"):
        return ""
    return plain(panels.first().render())


async def test_ray_state_shows_nodes_joined_and_resources_while_the_cluster_forms() -> None:
    write_ray_recipe()
    backend = RayReplay()
    app = SparkApp(ReplaySession(backend), recipe=RECIPE, auto_refresh=False, handle_signals=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 10, "discovery")
        assert app.selected is not None and app.selected.name == RECIPE
        await pilot.press("l")
        if isinstance(app.screen, Dialog):  # the fit check's question, when it asks one
            await pilot.press("y")
        await wait_until(pilot, lambda: app.cluster is not None, 10, "the launch")
        assert ray_line(app) == ""  # nothing until Ray reports

        backend.step.set()
        await wait_until(pilot, lambda: "forming" in ray_line(app), 10, "forming")
        line = ray_line(app)
        assert f"forming: 1 of {backend.plan_ranks} nodes joined" in line
        assert "CPU 20 · GPU 1 · memory 94.5 GiB · object store 40.5 GiB" in line

        backend.step.set()
        await wait_until(pilot, lambda: "formed" in ray_line(app), 10, "formed")
        line = ray_line(app)
        assert "formed: 2 of 2 nodes joined ■■" in line
        assert "CPU 40 · GPU 2 · memory 189.0 GiB" in line

        backend.step.set()
        await wait_until(pilot, lambda: app.cluster is not None and app.cluster.ready, 10, "ready")
        assert "formed" in ray_line(app)  # still said while the cluster runs

        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, Dialog), 5, "the stop question")
        await pilot.press("y")
        await wait_until(pilot, lambda: ray_line(app) == "", 10, "the Ray line gone at the stop")

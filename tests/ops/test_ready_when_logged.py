"""The launch asks the head's /health as soon as the head's log says its API server is up,
not at its next poll: real ops.launch over simulated Sparks (their engine prints vLLM's
"Application startup complete." a moment before its API answers, as uvicorn logs it before its
socket listens), with the poll stretched to an hour so that only the log line can wake it in
time, and the first ask after the line refused."""

from __future__ import annotations

import asyncio

import pytest

from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops import launch as launch_module
from spark_tui.ops.cluster import stop
from spark_tui.ops.events import ClusterReady, LogLine
from spark_tui.remote.probe import probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.service.event_stream import streamed
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base


async def test_the_heads_ready_line_asks_health_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_module, "HEALTH_POLL_S", 3600.0)
    recipe = find_recipe("glm-5.3-flash")
    scenario = Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(), pace=0.02)
    seen: list[object] = []
    async with SimCluster(scenario) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
            plan = build_plan(recipe, apply_overrides(recipe, []), await probe_pool(pool))
            # The head's API answers half a second after its line: the /health the line
            # triggers is refused, and the answer must not wait for the next poll.
            plan.head.container.env["SPARK_SIM_LISTEN_AFTER_S"] = "0.5"

            async def until_ready() -> None:
                async for event in streamed(
                    launch_module.launch, plan, pool, wait_ready=True, follow=False
                ):
                    seen.append(event)
                    if isinstance(event, ClusterReady):
                        return

            try:
                # Far longer than the simulated startup takes; only a launch that waits
                # for its next poll (an hour away) runs into it.
                await asyncio.wait_for(until_ready(), 120)
            finally:
                await stop(pool, plan.cluster_id, stop_timeout=1)
    lines = [e for e in seen if isinstance(e, LogLine)]
    up = [e for e in lines if e.kind == "ready" and e.scope == "api" and e.rank == 0]
    assert up, "the head's log said its API server is up"
    assert isinstance(seen[-1], ClusterReady)

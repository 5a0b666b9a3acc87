"""Time from `launch` to every rank's container started, on simulated Sparks (printed).

The engine's own loading is excluded: the clock stops when the last rank's container has
been started (the `launch` ResultEvent carries the same figure as `start_seconds`). The
time includes the stale-container check, the image check on every node and the mount
folders. Budget in DESIGN.md: under 1 s for two lab nodes.

    python benchmarks/launch_latency.py [--nodes 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.cluster import stop
from spark_tui.ops.events import RankState, RankStateChanged, ResultEvent
from spark_tui.ops.launch import launch
from spark_tui.remote.probe import probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.service.event_stream import streamed
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base

RECIPE = "glm-5.3-flash"  # two ranks as written; TP = N for other node counts


async def once(pool: ConnectionPool, nodes: int) -> tuple[float, float]:
    """(seconds until every rank is started, seconds the ranks' starts took)."""
    facts = await probe_pool(pool)
    recipe = find_recipe(RECIPE)
    sets = [] if nodes == 2 else [f"tensor_parallel={nodes}"]
    plan = build_plan(recipe, apply_overrides(recipe, sets), facts)
    t0 = time.perf_counter()
    started: set[int] = set()
    elapsed = start_seconds = 0.0
    async for ev in streamed(launch, plan, pool, wait_ready=False, follow=False):
        if isinstance(ev, RankStateChanged) and ev.state is RankState.STARTING:
            started.add(ev.rank)
            if len(started) == len(plan.ranks):
                elapsed = time.perf_counter() - t0
        if isinstance(ev, ResultEvent) and ev.kind == "launch":
            start_seconds = float(ev.payload["start_seconds"])
    await stop(pool, plan.cluster_id, stop_timeout=1)
    return elapsed, start_seconds


async def main(nodes: int, repeat: int) -> None:
    scenario = Scenario(nodes=nodes, ssh_port=0, base_address=random_loopback_base(nodes))
    async with SimCluster(scenario) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
            runs = [await once(pool, nodes) for _ in range(repeat)]
    total = statistics.median(r[0] for r in runs)
    starts = statistics.median(r[1] for r in runs)
    print(
        f"launch to all {nodes} ranks started (simulated nodes): median {total:.3f} s "
        f"(of which creating and starting the containers {starts:.3f} s); budget < 1 s"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.repeat))

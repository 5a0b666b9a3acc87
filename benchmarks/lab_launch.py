"""Launch to all ranks started, on two lab nodes (real sshd + dockerd): prints, never fails.

    python benchmarks/lab_launch.py [--runs 5]

Needs Linux and root (it brings up its own namespace lab and takes it down again).
Two figures per run, engine loading excluded (the launch returns once every container has
started, before the simulated engine loads):
- `start`: from starting the head's container to every worker's started (the launch's own
  figure, ResultEvent "launch" start_seconds);
- `launch`: the whole `ops.launch.launch()` call up to that point, including its preflight
  (stale containers, images on every node, mount folders).
Budget (DESIGN.md): under 1 s for two lab nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_tui.service.event_stream import streamed  # noqa: E402
from spark_tui.sim.lab import Lab, LabConfig, unavailable_reason  # noqa: E402

BUDGET_S = 1.0
RECIPE = "glm-5.3-flash"


async def _runs(lab: Lab, runs: int) -> list[tuple[float, float]]:
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.plan import build_plan
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.ops.cluster import stop
    from spark_tui.ops.events import ResultEvent
    from spark_tui.ops.launch import launch
    from spark_tui.remote.probe import probe_pool
    from spark_tui.remote.ssh import ConnectionPool

    recipe = find_recipe(RECIPE)
    pool = ConnectionPool(lab.inventory_nodes(), ssh_config=())
    await pool.open()
    results = []
    try:
        plan = build_plan(recipe, apply_overrides(recipe, []), await probe_pool(pool))
        for _ in range(runs):
            t0 = time.perf_counter()
            start = float("nan")
            async for ev in streamed(launch, plan, pool, wait_ready=False, follow=False):
                if isinstance(ev, ResultEvent) and ev.kind == "launch":
                    start = float(ev.payload["start_seconds"])
            whole = time.perf_counter() - t0
            results.append((start, whole))
            await stop(pool, plan.cluster_id, stop_timeout=2)
    finally:
        await pool.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        print(f"lab launch benchmark skipped: {reason}")
        return 0
    cfg = LabConfig(
        nodes=2,
        pace=0.05,
        prefix="labbench",
        subnet="10.77.99.0/24",
        state_dir=Path("/var/tmp/spark-tui-labbench"),
    )
    lab = Lab(cfg)
    t0 = time.perf_counter()
    info = lab.up()
    print(f"lab up: {time.perf_counter() - t0:.2f} s (image: {info.image.get('base')})")
    try:
        results = asyncio.run(_runs(lab, args.runs))
    finally:
        lab.down(quiet=True)
    print(f"{'run':>4} {'start (s)':>10} {'launch (s)':>11}")
    for i, (start, whole) in enumerate(results, 1):
        print(f"{i:>4} {start:>10.3f} {whole:>11.3f}")
    starts = [s for s, _ in results]
    wholes = [w for _, w in results]
    print(
        f"median: start {statistics.median(starts):.3f} s, launch {statistics.median(wholes):.3f} s"
        f"  (budget: start under {BUDGET_S:g} s -> "
        f"{statistics.median(starts) / BUDGET_S:.2f} of budget)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

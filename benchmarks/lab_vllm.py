"""Real vLLM (CPU build) in the lab: the first image build, `lab up`, launch to ready, and
spark-tui's own share of that launch. Prints figures, never fails.

    python benchmarks/lab_vllm.py [--fresh-build]

Needs Linux and root. The image build is done once per vLLM version and cached (see
spark_tui/sim/lab/vllm_image.py); without --fresh-build the first build's figures are read
from the cache's record and only the cached check is timed (--fresh-build rebuilds into a
temporary cache: about 5 minutes of pip install and 600 MB from the registries).

- `lab up`: two namespace nodes, the cached image loaded into both dockerds, the model copied.
- launch to ready: `ops.launch.launch()` of the lab's recipe until ClusterReady.
- vLLM's own part: from the head container's start (docker's State.StartedAt) to its
  "Application startup complete." line (docker's log timestamp).
- spark-tui's share: launch to ready minus vLLM's own part (preflight, container creation
  and start on both nodes, log following, the /health poll through the SSH forward).
Budget (DESIGN.md): spark-tui's share under 2 % of launch to ready.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "lab"))

from spark_tui.sim.lab import Lab, unavailable_reason, vllm_image  # noqa: E402
from spark_tui.sim.lab.config import DEFAULT_CACHE_DIR  # noqa: E402

BUDGET_SHARE = 0.02
READY_LINE = "Application startup complete."


def _ts(stamp: str) -> float:
    """Docker's RFC 3339 time with nanoseconds -> seconds since the epoch."""
    stamp = stamp.rstrip("Z")
    main, _, frac = stamp.partition(".")
    base = dt.datetime.fromisoformat(main).replace(tzinfo=dt.UTC).timestamp()
    return base + (float("0." + frac) if frac else 0.0)


def _build(fresh: bool) -> None:
    if fresh:
        with tempfile.TemporaryDirectory(prefix="spark-tui-vllm-build-") as tmp:
            t0 = time.monotonic()
            build = vllm_image.ensure(Path(tmp), say=print)
            total = time.monotonic() - t0
            print(
                f"first image build (fresh): {total:.0f} s  (venv {build.venv_seconds:.0f} s, "
                f"model {build.model_seconds:.0f} s, archive {build.archive_seconds:.0f} s)"
            )
        return
    times = vllm_image.build_times(DEFAULT_CACHE_DIR)
    if times:
        total = sum(times.values())
        parts = ", ".join(f"{k.removesuffix('_seconds')} {v:.0f} s" for k, v in times.items())
        print(f"first image build (recorded in the cache): {total:.0f} s  ({parts})")
    t0 = time.monotonic()
    build = vllm_image.ensure(DEFAULT_CACHE_DIR, say=print)
    what = "found in the cache" if build.cached else "built now"
    print(f"image build step on this run: {time.monotonic() - t0:.1f} s ({what})")


async def _launch(lab: Lab, recipe_path: Path) -> dict[str, Any]:
    import docker

    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.plan import build_plan
    from spark_tui.core.recipe_loader import load_recipe_file
    from spark_tui.ops.cluster import stop
    from spark_tui.ops.events import ClusterReady, ResultEvent
    from spark_tui.ops.launch import launch
    from spark_tui.remote.probe import probe_pool
    from spark_tui.remote.ssh import ConnectionPool

    recipe = load_recipe_file(recipe_path)
    pool = ConnectionPool(lab.inventory_nodes(), ssh_config=())
    await pool.open()
    out: dict[str, Any] = {}
    try:
        plan = build_plan(recipe, apply_overrides(recipe, []), await probe_pool(pool))
        t0 = time.time()
        async for ev in launch(plan, pool, wait_ready=True, follow=False, ready_timeout=1800):
            if isinstance(ev, ResultEvent) and ev.kind == "launch":
                out["started"] = time.time() - t0
            if isinstance(ev, ClusterReady):
                out["ready"] = time.time() - t0
                break
        client = docker.DockerClient(base_url=f"unix://{lab.node(1).docker_socket}")
        try:
            head = client.containers.get(plan.ranks[0].container.name)
            started_at = _ts(head.attrs["State"]["StartedAt"])
            for raw in head.logs(timestamps=True).decode("utf-8", "replace").splitlines():
                stamp, _, text = raw.partition(" ")
                if READY_LINE in text:
                    out["vllm_own"] = _ts(stamp) - started_at
                    break
        finally:
            client.close()
        await stop(pool, plan.cluster_id, stop_timeout=5)
    finally:
        await pool.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fresh-build", action="store_true")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    _build(args.fresh_build)

    from labkit import claim, unique_config

    cfg = unique_config(2, memory_gb=128, engine="vllm")
    claim(cfg)
    lab = Lab(cfg)
    try:
        t0 = time.monotonic()
        lab.up()
        print(f"lab up (2 nodes, image loaded into both dockerds): {time.monotonic() - t0:.1f} s")
        recipe = lab.write_recipe(cfg.state_dir)
        assert recipe is not None
        got = asyncio.run(_launch(lab, recipe))
    finally:
        lab.down(quiet=True)
    ready, own = got.get("ready"), got.get("vllm_own")
    print(f"launch to all ranks started: {got.get('started', float('nan')):.2f} s")
    if ready is None or own is None:
        print(f"launch did not reach ready: {got}")
        return 0
    share = ready - own
    verdict = "within" if share / ready <= BUDGET_SHARE else "OVER"
    print(f"launch to ready with real vLLM: {ready:.1f} s")
    print(f"  vLLM's own startup (container start -> '{READY_LINE}'): {own:.1f} s")
    print(
        f"  spark-tui's share: {share:.2f} s = {100 * share / ready:.2f} % "
        f"({verdict} the {100 * BUDGET_SHARE:.0f} % budget)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Real vLLM (CPU build) in the lab: the first image build, `lab up`, launch to ready, and
spark-tui's own share of that launch. Prints figures, never fails.

    python benchmarks/lab_vllm.py [--fresh-build]

Needs Linux and root; run it under `flock /tmp/spark-tui-realvllm.lock` (it starts real
vLLM). The image build is done once per vLLM version and cached (see
spark_tui/sim/lab/vllm_image.py); without --fresh-build the first build's figures are read
from the cache's record and only the cached check is timed (--fresh-build rebuilds into a
temporary cache: about 6 minutes of pip install and 600 MB from the registries).

- `lab up`: two namespace nodes, the cached image loaded into both dockerds, the model copied.
- launch to ready: the service's launch (`Session.launch`) of the lab's recipe until
  ClusterReady, twice, each in a Python process of its own: as the cockpit runs it (the
  nodes discovered, the recipe's verdict prepared and the launch's code loaded, then
  launched at once: its probe is reused) and as `spark-tui launch --wait` does (a new
  session: its imports, connect and probe first); then evaluation, container
  creation and start on both nodes, log following, the first-token probe. Each with an
  empty flag cache (a first launch of the image): the image's `vllm serve --help=all` starts
  as soon as the image is known on the head and runs beside the ranks (when it ended is
  printed: it shares the two cores with vLLM's startup meanwhile).
- vLLM's own part: from the head container's start (docker's State.StartedAt) to its
  "Application startup complete." line (docker's log timestamp).
- spark-tui's share: launch to ready minus vLLM's own part, split into what comes before
  the first container starts (of it, the flag check) and after vLLM is up.
Budget (DESIGN.md): spark-tui's share under 2 % of launch to ready.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import subprocess
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


async def _launch(lab: Lab, recipe_path: Path, *, discovered: bool) -> dict[str, Any]:
    from spark_tui.core.recipe_loader import load_recipe_file
    from spark_tui.service import events as ev
    from spark_tui.service.session import Session

    recipe = load_recipe_file(recipe_path)
    # An empty flag cache: the launch asks the image for its flags as a first launch does.
    cache = Path(tempfile.mkdtemp(prefix="spark-tui-bench-cache-"))
    os.environ["XDG_CACHE_HOME"] = str(cache)
    os.environ["SPARK_TUI_CACHE_DIR"] = str(cache)
    session = Session(lab.inventory_nodes())
    out: dict[str, Any] = {}
    if discovered:
        # The cockpit: the nodes discovered, the recipe's verdict prepared (which starts
        # its image's flag table) and the launch's code loaded, then the launch key pressed
        # at once.
        async for event in session.discover():
            if isinstance(event, ev.Question):
                event.reply(True)
        await session.prepare(recipe, {}, flags=False)
        await session.load_launch()
    t0 = time.time()

    async def table_kept() -> None:
        # When the image's flag table was kept: its help run has ended.
        while not any(cache.glob("vllm-serve-help/*.txt")):
            await asyncio.sleep(0.2)
        out["flag_table"] = time.time() - t0

    watching = asyncio.ensure_future(table_kept())
    try:
        async for event in session.launch(
            recipe, {}, insist=True, replace=True, wait_ready=True, follow=False
        ):
            now = time.time() - t0
            if isinstance(event, ev.Question):
                event.reply(True)
            elif isinstance(event, ev.Probed):
                out.setdefault("probed", now)
            elif isinstance(event, ev.Evaluated):
                out["evaluated"] = now
            elif isinstance(event, ev.RankStateChanged) and event.state is ev.RankState.CREATED:
                out.setdefault("first_created", now)
            elif isinstance(event, ev.RankStateChanged) and event.state is ev.RankState.STARTING:
                out["started"] = now  # the last rank's start (the session keeps the result)
            elif isinstance(event, ev.ClusterReady):
                out["ready"] = now
                break
        import docker  # (after the launch: a headless launch loads it itself)

        cluster = session.cluster
        assert cluster is not None and cluster.plan is not None
        client = docker.DockerClient(base_url=f"unix://{lab.node(1).docker_socket}")
        try:
            head = client.containers.get(cluster.plan.ranks[0].container.name)
            started_at = _ts(head.attrs["State"]["StartedAt"]) - t0
            out["head_started"] = started_at
            for raw in head.logs(timestamps=True).decode("utf-8", "replace").splitlines():
                stamp, _, text = raw.partition(" ")
                if READY_LINE in text:
                    out["vllm_own"] = _ts(stamp) - t0 - started_at
                    break
        finally:
            client.close()
        await session.nodes.stop(cluster.cluster_id, None)
    finally:
        watching.cancel()
        await session.close()
    return out


def _report(what: str, got: dict[str, Any]) -> None:
    nan = float("nan")
    ready, own = got.get("ready"), got.get("vllm_own")
    probed = f"{got['probed']:.2f} s" if "probed" in got else "not again (the discovery's)"
    print(f"{what}:")
    print(
        f"  probed {probed}, evaluated (fit; the flag check noted pending) "
        f"{got.get('evaluated', nan):.2f} s, first container created "
        f"{got.get('first_created', nan):.2f} s, all ranks started {got.get('started', nan):.2f} s, "
        f"the image's flag table (a first `vllm serve --help=all`) kept "
        f"{got.get('flag_table', nan):.2f} s"
    )
    if ready is None or own is None:
        print(f"  launch did not reach ready: {got}")
        return
    share = ready - own
    before = got["head_started"]
    after = ready - before - own
    verdict = "within" if share / ready <= BUDGET_SHARE else "OVER"
    print(f"  launch to ready with real vLLM: {ready:.1f} s")
    print(f"  vLLM's own startup (container start -> '{READY_LINE}'): {own:.1f} s")
    print(
        f"  spark-tui's share: {share:.2f} s = {100 * share / ready:.2f} % "
        f"({verdict} the {100 * BUDGET_SHARE:.0f} % budget)"
    )
    print(f"    before the head container started: {before:.2f} s")
    print(f"    after vLLM was up (health through the forward, first token): {after:.2f} s")
    overlap = max(0.0, got.get("flag_table", before) - before)
    print(
        f"  the flag check's help run went on {overlap:.1f} s into vLLM's startup "
        "(sharing the lab's two cores with it)"
    )


def _launched(state_dir: Path, recipe: Path, flow: str) -> dict[str, Any]:
    """One launch in a Python process of its own, as a user's run is (nothing another
    launch imported is loaded yet)."""
    argv = [sys.executable, __file__, "--launch", str(state_dir), str(recipe), flow]
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = res.stdout.strip().splitlines()
    if res.returncode != 0 or not lines:
        return {"error": (res.stderr or res.stdout)[-2000:]}
    return dict(json.loads(lines[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fresh-build", action="store_true")
    parser.add_argument("--launch", nargs=3, metavar=("STATE_DIR", "RECIPE", "FLOW"))
    args = parser.parse_args()
    if args.launch:  # one launch of the lab whose state is in STATE_DIR (see _launched)
        state_dir, recipe, flow = args.launch
        found = Lab.load(Path(state_dir))
        assert found is not None
        got = asyncio.run(_launch(found, Path(recipe), discovered=flow == "cockpit"))
        print(json.dumps(got))
        return 0
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
        load = os.getloadavg()
        cockpit = _launched(cfg.state_dir, recipe, "cockpit")
        headless = _launched(cfg.state_dir, recipe, "headless")
        load_after = os.getloadavg()
    finally:
        lab.down(quiet=True)
    _report("the cockpit's launch (nodes discovered, recipe chosen, then launched)", cockpit)
    _report("a headless launch (a new session: connect and probe first)", headless)
    print(
        "load average (1, 5, 15 min) before the launches: "
        + ", ".join(f"{x:.1f}" for x in load)
        + "; after: "
        + ", ".join(f"{x:.1f}" for x in load_after)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

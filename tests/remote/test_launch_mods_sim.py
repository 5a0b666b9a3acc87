"""Mods on simulated Sparks: each rank's container gets the mod folder (Docker's archive
upload), runs it before `vllm serve`, and the engine reads the chat template it wrote; a
failing mod is the rank's failure with its own lines."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import LaunchPlan, build_plan
from spark_tui.core.recipe_loader import bundled_recipes_dir, find_recipe
from spark_tui.ops.events import ClusterEvent, ClusterReady, LogLine, RankState, RankStateChanged
from spark_tui.ops.launch import LaunchFailed, launch
from spark_tui.remote.probe import probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.service.event_stream import streamed
from spark_tui.sim.nodes import SimCluster

TEMPLATE = "/workspace/mods/chat-tmpl/chat.jinja"
WRITE_TEMPLATE = (
    'echo "writing the chat template in $PWD (workspace $WORKSPACE_DIR)"\n'
    "printf '%s\\n' '{% for m in messages %}{{ m.content }}{% endfor %}' > chat.jinja\n"
)


def recipe_with(tmp_path: Path, mods: dict[str, str]) -> Path:
    data = yaml.safe_load((bundled_recipes_dir() / "glm-5.3-flash.yaml").read_text())
    data["mods"] = [f"mods/{name}" for name in mods]
    for name, body in mods.items():
        folder = tmp_path / "mods" / name
        folder.mkdir(parents=True)
        (folder / "run.sh").write_text("#!/bin/sh\n" + body)
    path = tmp_path / "modded.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


async def plan_for(pool: ConnectionPool, path: Path) -> LaunchPlan:
    facts = await probe_pool(pool)
    recipe = find_recipe(str(path))
    return build_plan(recipe, apply_overrides(recipe, [f"chat_template={TEMPLATE}"]), facts)


def lines(events: list[ClusterEvent], rank: int) -> list[str]:
    return [e.text for e in events if isinstance(e, LogLine) and e.rank == rank]


async def test_the_mod_runs_on_every_rank_before_serve_and_its_file_is_used(
    sim_scenario, tmp_path: Path
) -> None:
    path = recipe_with(tmp_path, {"chat-tmpl": WRITE_TEMPLATE})
    async with SimCluster(sim_scenario(2)) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
            plan = await plan_for(pool, path)
            events = [
                ev async for ev in streamed(launch, plan, pool, follow=False, ready_timeout=60)
            ]
    assert [e for e in events if isinstance(e, ClusterReady)]
    for rank in (0, 1):
        log = lines(events, rank)
        start = log.index("spark-tui prelaunch: mod chat-tmpl: start")
        wrote = next(i for i, t in enumerate(log) if t.startswith("writing the chat template"))
        done = log.index("spark-tui prelaunch: done; starting the serve command")
        assert start < wrote < done
        # run.sh ran in its folder, with WORKSPACE_DIR the container's own working folder.
        in_dir, _, workspace = log[wrote].partition(" (workspace ")
        assert in_dir.endswith("/workspace/mods/chat-tmpl")
        assert workspace and "/workspace/mods" not in workspace
        assert done < next(i for i, t in enumerate(log) if "Automatically detected platform" in t)
    # The head's API server opened the file the mod wrote (a missing one fails, see below).
    size = len("{% for m in messages %}{{ m.content }}{% endfor %}\n")
    used = [t for t in lines(events, 0) if "Using supplied chat template" in t]
    assert used and used[0].endswith(f"({size} chars)")
    kinds = {e.text: e.kind for e in events if isinstance(e, LogLine) and e.rank == 0}
    assert kinds["spark-tui prelaunch: mod chat-tmpl: start"] == "phase"


async def test_a_failing_mod_is_the_ranks_failure_with_its_lines(
    sim_scenario, tmp_path: Path
) -> None:
    bad = "echo 'applying fix-attn'\necho 'fix-attn: vllm/attention.py not found' >&2\nexit 3\n"
    path = recipe_with(tmp_path, {"chat-tmpl": WRITE_TEMPLATE, "fix-attn": bad})
    events: list[ClusterEvent] = []
    async with SimCluster(sim_scenario(2)) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
            plan = await plan_for(pool, path)
            with pytest.raises(LaunchFailed) as info:
                async for ev in streamed(
                    launch, plan, pool, follow=False, ready_timeout=60, settle=0.5
                ):
                    events.append(ev)
    failure = info.value
    assert "its mod fix-attn failed with exit code 3 before vllm serve started" in failure.message
    assert "fix-attn: vllm/attention.py not found" in failure.lines
    assert failure.lines[-1] == "spark-tui prelaunch: mod fix-attn failed with exit code 3"
    failed = [e for e in events if isinstance(e, RankStateChanged) and e.state is RankState.FAILED]
    assert failed and all("fix-attn" in (e.reason or "") for e in failed)
    # vllm serve never started on the failed rank.
    assert not any("Automatically detected platform" in t for t in lines(events, failure.rank))


async def test_without_the_mod_the_engine_refuses_the_missing_template(
    sim_scenario, tmp_path: Path
) -> None:
    path = recipe_with(tmp_path, {})
    async with SimCluster(sim_scenario(2)) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
            plan = await plan_for(pool, path)
            assert plan.ranks[0].container.entrypoint is None  # no mods: no wrapper
            with pytest.raises(LaunchFailed) as info:
                async for _ in streamed(
                    launch, plan, pool, follow=False, ready_timeout=60, settle=0.5
                ):
                    pass
    assert any("looks like a file path, but it failed to be opened" in t for t in info.value.lines)

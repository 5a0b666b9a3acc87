"""Mods on the lab (real sshd and dockerd, an image whose /bin/sh is busybox): the mod folder
is uploaded into each rank's container before it starts, runs there before `vllm serve`, and
the engine then reads the chat template the mod wrote; a failing mod is the rank's failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures_stack import lab_plan, lab_pool, leaves_no_container
from labkit import lab_guard

from spark_tui.core.inventory import InventoryNode
from spark_tui.ops.events import ClusterEvent, ClusterReady, LogLine
from spark_tui.service.event_stream import streamed
from spark_tui.sim.lab import Lab

lab_guard()

pytestmark = pytest.mark.lab

TEMPLATE = "/workspace/mods/chat-tmpl/chat.jinja"
JINJA = "{% for m in messages %}{{ m.content }}{% endfor %}"
WRITE_TEMPLATE = (
    'echo "chat-tmpl: writing $PWD/chat.jinja (workspace $WORKSPACE_DIR)"\n'
    f"printf '%s\\n' '{JINJA}' > chat.jinja\n"
)


@pytest.fixture(autouse=True)
def _no_containers_left(lab: Lab) -> Iterator[None]:
    yield from leaves_no_container(lab)


def recipe_with(tmp_path: Path, mods: dict[str, str]) -> Path:
    from spark_tui.core.recipe_loader import bundled_recipes_dir

    data = yaml.safe_load((bundled_recipes_dir() / "glm-5.3-flash.yaml").read_text())
    data["mods"] = [f"mods/{name}" for name in mods]
    for name, body in mods.items():
        folder = tmp_path / "mods" / name
        folder.mkdir(parents=True)
        (folder / "run.sh").write_text("#!/bin/sh\n" + body)
    path = tmp_path / "modded.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


async def launch_events(
    nodes: list[InventoryNode], path: Path
) -> tuple[Any, list[ClusterEvent], Any]:
    """(plan, events, the LaunchFailed or None) of one launch of the recipe on the lab."""
    from spark_tui.ops.cluster import stop
    from spark_tui.ops.launch import LaunchFailed, launch

    pool = lab_pool(nodes)
    await pool.open()
    events: list[ClusterEvent] = []
    failure = None
    try:
        plan = await lab_plan(pool, path, [f"chat_template={TEMPLATE}"])
        try:
            async for ev in streamed(
                launch, plan, pool, follow=False, ready_timeout=90, settle=0.5
            ):
                events.append(ev)
        except LaunchFailed as exc:
            failure = exc
        return plan, events, failure
    finally:
        try:
            if failure is None and events:
                await stop(pool, plan.cluster_id)
        finally:
            await pool.close()


def log(events: list[ClusterEvent], rank: int) -> list[str]:
    return [e.text for e in events if isinstance(e, LogLine) and e.rank == rank]


async def test_the_mod_runs_on_both_ranks_and_the_engine_uses_its_file(
    lab: Lab, lab_nodes: list[InventoryNode], tmp_path: Path
) -> None:
    path = recipe_with(tmp_path, {"chat-tmpl": WRITE_TEMPLATE})
    plan, events, failure = await launch_events(lab_nodes, path)
    assert failure is None, failure
    assert [e for e in events if isinstance(e, ClusterReady)]
    for rank in (0, 1):
        lines = log(events, rank)
        start = lines.index("spark-tui prelaunch: mod chat-tmpl: start")
        wrote = lines.index("chat-tmpl: writing /workspace/mods/chat-tmpl/chat.jinja (workspace /)")
        done = lines.index("spark-tui prelaunch: done; starting the serve command")
        serve = next(i for i, t in enumerate(lines) if "Automatically detected platform" in t)
        assert start < wrote < done < serve
    used = [t for t in log(events, 0) if "Using supplied chat template" in t]
    assert used and used[0].endswith(f"{TEMPLATE} ({len(JINJA) + 1} chars)")


async def test_a_failing_mod_fails_its_rank_with_its_lines(
    lab: Lab, lab_nodes: list[InventoryNode], tmp_path: Path
) -> None:
    bad = "echo 'fix-attn: patching'\necho 'fix-attn: nothing to patch' >&2\nexit 4\n"
    path = recipe_with(tmp_path, {"fix-attn": bad})
    _plan, events, failure = await launch_events(lab_nodes, path)
    assert failure is not None
    assert "its mod fix-attn failed with exit code 4 before vllm serve started" in failure.message
    assert failure.lines == (
        "fix-attn: patching",
        "fix-attn: nothing to patch",
        "spark-tui prelaunch: mod fix-attn failed with exit code 4",
    )
    assert not any("Automatically detected platform" in t for t in log(events, failure.rank))

"""A vllm-ray recipe on two lab nodes with REAL Ray (2.60, from PyPI) in the containers: the
Ray head and worker form a cluster across the lab's network namespaces, `vllm serve
--distributed-executor-backend ray` (the stand-in, which drives real Ray actors on both
nodes) is exec'd in the head, spark-tui follows it to ready, smoke passes, a fresh process
re-attaches, stop leaves no container; a killed Ray worker is reported and torn down.

One lab (the session's) and one Ray image serve the module.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures_stack import (
    cli,
    container_env,
    kill_container,
    lab_plan,
    lab_pool,
    leaves_no_container,
    write_inventory,
)
from labkit import lab_guard

from spark_tui.core.errors import OperationFailed
from spark_tui.core.inventory import InventoryNode
from spark_tui.ops.events import (
    ClusterEvent,
    ClusterReady,
    LogLine,
    RankState,
    RankStateChanged,
    RayClusterState,
)
from spark_tui.service.event_stream import streamed
from spark_tui.sim.lab import Lab, ray_image
from spark_tui.sim.lab.dockerd import containers

lab_guard()

pytestmark = pytest.mark.lab

BASE_RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "glm-5.3-flash.yaml"
READY_TIMEOUT = 300


@pytest.fixture(scope="module")
def files(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The Ray image in both nodes, the inventory, and a vllm-ray recipe that runs it."""
    ray_image.ensure_image([n.docker_socket for n in lab.nodes])
    inventory = write_inventory(lab, tmp_path_factory, "lab-ray")
    d = inventory.parent
    recipe = yaml.safe_load(BASE_RECIPE.read_text())
    recipe["container"] = ray_image.RAY_IMAGE
    recipe["defaults"]["distributed_executor_backend"] = "ray"  # sparkrun's Ray hint
    path = d / "glm-ray.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return {"inventory": inventory, "recipe": path}


@pytest.fixture(autouse=True)
def _no_containers_left(lab: Lab) -> Iterator[None]:
    yield from leaves_no_container(lab)


async def _launch(
    plan: Any, pool: Any, *, follow: bool, settle: float = 0.5, lines: bool = True
) -> AsyncIterator[ClusterEvent]:
    from spark_tui.ops.launch import LaunchFailed, launch

    try:
        async for ev in streamed(
            launch,
            plan,
            pool,
            wait_ready=True,
            follow=follow,
            ready_timeout=READY_TIMEOUT,
            settle=settle,
        ):
            yield ev
    except LaunchFailed as exc:
        if not lines:
            raise
        # An unexpected failure: its explaining lines are the evidence.
        pytest.fail(f"{exc.message}\n" + "\n".join(exc.lines), pytrace=False)
    except OperationFailed as exc:
        # A failure while starting (the Ray head): the cause's lines are the evidence.
        said = getattr(exc.__cause__, "lines", ())
        pytest.fail(f"{exc.message}\n" + "\n".join(said), pytrace=False)


async def test_ray_cluster_forms_serves_smokes_reattaches_and_stops(
    lab: Lab, lab_nodes: list[InventoryNode], files: dict[str, Path]
) -> None:
    pool = lab_pool(lab_nodes)
    await pool.open()
    events: list[ClusterEvent] = []
    try:
        plan = await lab_plan(pool, files["recipe"])
        assert plan.runtime == "vllm-ray"
        async for ev in _launch(plan, pool, follow=False):
            events.append(ev)
    finally:
        await pool.close()  # this "spark-tui" goes away; the cluster keeps running

    head_ip, worker_ip = (r.cluster_address for r in plan.ranks)
    states = [e for e in events if isinstance(e, RayClusterState)]
    assert states and states[-1].formed and states[-1].nodes_joined == 2
    assert states[-1].nodes_expected == 2 and states[-1].resources.get("CPU", 0) > 0
    assert any(isinstance(e, ClusterReady) for e in events)
    lines = {r: [e.text for e in events if isinstance(e, LogLine) and e.rank == r] for r in (0, 1)}
    # Real Ray's own lines, classified, on both ranks.
    assert any("Ray runtime started" in t for t in lines[0]), lines[0][-20:]
    assert any("Ray runtime started" in t for t in lines[1]), lines[1][-20:]
    ray_phase = [e for e in events if isinstance(e, LogLine) and e.kind == "phase"]
    assert any("Ray runtime started" in e.text for e in ray_phase)
    # The serve ran in the head's container and placed a Ray worker on the other node.
    assert any("Connecting to existing Ray cluster" in t for t in lines[0])
    assert any(f"ip={worker_ip})" in t and "RayWorkerWrapper" in t for t in lines[0])
    ranks_ready = {
        e.rank for e in events if isinstance(e, RankStateChanged) and e.state is RankState.READY
    }
    assert ranks_ready == {0, 1}
    for index, rank in ((1, plan.ranks[0]), (2, plan.ranks[1])):
        env = container_env(lab, index, rank.container.name)
        assert env["RAY_memory_monitor_refresh_ms"] == "0"
        assert env["VLLM_HOST_IP"] == rank.cluster_address
        assert env["MASTER_ADDR"] == head_ip

    smoke = cli("smoke", "--inventory", str(files["inventory"]), "--json")
    assert smoke.returncode == 0, smoke.stdout[-2000:] + smoke.stderr[-2000:]

    status = cli("status", "--inventory", str(files["inventory"]), "--json")
    assert status.returncode == 0 and plan.cluster_id in status.stdout, status.stderr

    script = (
        "import asyncio, faulthandler, sys\n"
        "faulthandler.dump_traceback_later(100)\n"
        "from spark_tui.core.inventory import parse_inventory\n"
        "from spark_tui.remote.ssh import ConnectionPool\n"
        "from spark_tui.ops.attach import attach\n"
        "from spark_tui.service.event_stream import streamed\n"
        "from spark_tui.ops.events import ClusterReady, LogLine\n"
        "async def main():\n"
        "    pool = ConnectionPool(parse_inventory(open(sys.argv[1]).read()), ssh_config=())\n"
        "    await pool.open()\n"
        "    ranks, ray_lines, ready = set(), 0, False\n"
        "    try:\n"
        "        async for ev in streamed(attach, pool, follow=True, ready_timeout=60):\n"
        "            if isinstance(ev, LogLine):\n"
        "                ranks.add(ev.rank)\n"
        "                ray_lines += 'RayWorkerWrapper' in ev.text\n"
        "            if isinstance(ev, ClusterReady): print('READY', ev.cluster_id)\n"
        "            ready = ready or isinstance(ev, ClusterReady)\n"
        "            if ready and ranks == {0, 1}: break\n"
        "    finally:\n"
        "        await pool.close()\n"
        "    print('RANKS', sorted(ranks), 'RAYLINES', ray_lines > 0)\n"
        "asyncio.run(main())\n"
    )
    attached = subprocess.run(
        [sys.executable, "-c", script, str(files["inventory"])],
        capture_output=True,
        text=True,
        timeout=110,
        stdin=subprocess.DEVNULL,
    )
    assert attached.returncode == 0, attached.stderr
    assert f"READY {plan.cluster_id}" in attached.stdout
    assert "RANKS [0, 1] RAYLINES True" in attached.stdout

    stopped = cli("stop", "--inventory", str(files["inventory"]))
    assert stopped.returncode == 0, stopped.stderr
    for node in lab.nodes:
        assert containers(node.docker_socket) == [], f"a container is left on {node.name}"


async def test_a_killed_ray_worker_is_reported_and_the_cluster_torn_down(
    lab: Lab, lab_nodes: list[InventoryNode], files: dict[str, Path]
) -> None:
    from spark_tui.ops.launch import LaunchFailed

    pool = lab_pool(lab_nodes)
    await pool.open()
    events: list[ClusterEvent] = []
    try:
        plan = await lab_plan(pool, files["recipe"])
        worker = plan.ranks[1].container.name
        with pytest.raises(LaunchFailed) as failed:
            async for ev in _launch(plan, pool, follow=True, lines=False):
                events.append(ev)
                if isinstance(ev, ClusterReady):
                    kill_container(lab, 2, worker)
    finally:
        await pool.close()
    assert failed.value.rank == 1 and failed.value.node == lab.node(2).name
    assert "killed" in failed.value.message and failed.value.remedy
    by_rank = {
        (e.rank, e.state): e
        for e in events
        if isinstance(e, RankStateChanged) and e.state in (RankState.FAILED, RankState.STOPPED)
    }
    assert by_rank[(1, RankState.FAILED)].reason
    assert (0, RankState.STOPPED) in by_rank or (0, RankState.FAILED) in by_rank
    for node in lab.nodes:
        assert containers(node.docker_socket) == [], f"a container is left on {node.name}"

"""The remote layer and the operations against real sshd and real dockerd (issue 4's list):
probe, launch to ready with both ranks' logs, per-node network env, health through the
forward, a killed worker, an sshd restart during log streaming, attach from a fresh
process, stop, and a node that is down."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
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

from spark_tui.core.inventory import InventoryNode
from spark_tui.ops.events import (
    ClusterEvent,
    ClusterReady,
    LogLine,
    RankState,
    RankStateChanged,
    ResultEvent,
)
from spark_tui.service.event_stream import streamed
from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.dockerd import containers
from spark_tui.sim.lab.image import recipe_images
from spark_tui.sim.lab.shims import mem_total_kb

lab_guard()

pytestmark = pytest.mark.lab

RECIPE = "glm-5.3-flash"


@pytest.fixture(scope="module")
def inventory(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_inventory(lab, tmp_path_factory, "lab-ops")


@pytest.fixture(autouse=True)
def _no_containers_left(lab: Lab) -> Iterator[None]:
    """Every test starts and ends with no container on any node."""
    yield from leaves_no_container(lab)


async def _launch_events(
    plan: Any, pool: Any, *, follow: bool = False, wait_ready: bool = True
) -> AsyncIterator[ClusterEvent]:
    from spark_tui.ops.launch import launch

    async for ev in streamed(
        launch, plan, pool, wait_ready=wait_ready, follow=follow, ready_timeout=60, settle=0.5
    ):
        yield ev


async def test_probe_sees_both_nodes_as_gb10s_with_their_own_connectx(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    from spark_tui.remote.probe import probe_nodes

    facts = await probe_nodes(lab_nodes, ssh_config=())
    assert [f.name for f in facts] == [n.name for n in lab.nodes]
    image_ids = set()
    for f, layout in zip(facts, lab.nodes, strict=True):
        assert not f.errors, f.errors
        assert f.hostname == layout.name
        assert f.gpu_name == "NVIDIA GB10" and f.driver_version == "580.95.05"
        assert f.memory_total_bytes == mem_total_kb(lab.cfg.memory_gb) * 1024
        assert f.cluster_address == layout.address
        assert [(i.netdev, i.rdma_device) for i in f.connectx_up] == [
            (layout.ifname, "roce" + layout.ifname[2:].rsplit("np", 1)[0])
        ]
        assert f.docker_version and f.docker_version.startswith("20.10")
        refs = {i.ref: i.id for i in f.images}
        assert set(recipe_images()) <= set(refs)
        image_ids.update(refs[r] for r in recipe_images())
    # The same image (same id) on both nodes, under every recipe's name.
    assert len(image_ids) == 1
    assert facts[0].connectx_up[0].netdev != facts[1].connectx_up[0].netdev


async def test_launch_reaches_ready_with_both_ranks_logs_and_per_node_env(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    from spark_tui.ops.cluster import stop

    pool = lab_pool(lab_nodes)
    await pool.open()
    try:
        plan = await lab_plan(pool, RECIPE)
        events = [ev async for ev in _launch_events(plan, pool)]
        ready = [e for e in events if isinstance(e, ClusterReady)]
        assert len(ready) == 1 and ready[0].cluster_id == plan.cluster_id
        logged = {e.rank for e in events if isinstance(e, LogLine)}
        assert logged == {0, 1}, "both ranks' logs are streamed"
        states = {(e.rank, e.state) for e in events if isinstance(e, RankStateChanged)}
        assert (0, RankState.READY) in states and (1, RankState.READY) in states
        started = [e for e in events if isinstance(e, ResultEvent) and e.kind == "launch"]
        assert started and started[0].payload["ranks_started"] == 2

        # Each rank's env names its own node's interfaces, never the head's on the worker.
        head, worker = plan.ranks[0], plan.ranks[1]
        head_env = container_env(lab, 1, head.container.name)
        worker_env = container_env(lab, 2, worker.container.name)
        for key in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "UCX_NET_DEVICES"):
            assert head_env[key] == lab.node(1).ifname
            assert worker_env[key] == lab.node(2).ifname
        assert not [k for k, v in worker_env.items() if lab.node(1).ifname in v]

        # Health (and the API) through the SSH port forward to the head.
        async with httpx.AsyncClient(timeout=5) as client:
            health = await client.get(ready[0].base_url + "/health")
            models = await client.get(ready[0].base_url + "/v1/models")
        assert health.status_code == 200
        assert models.json()["data"][0]["id"] == plan.model

        report = await stop(pool, plan.cluster_id)
        assert len(report.removed) == 2 and report.ok
    finally:
        await pool.close()


async def test_a_killed_worker_stops_the_head_and_the_failure_is_reported(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    from spark_tui.ops.launch import LaunchFailed

    pool = lab_pool(lab_nodes)
    await pool.open()
    events: list[ClusterEvent] = []
    try:
        plan = await lab_plan(pool, RECIPE)
        worker = plan.ranks[1].container.name
        with pytest.raises(LaunchFailed) as failed:
            async for ev in _launch_events(plan, pool, follow=True):
                events.append(ev)
                if isinstance(ev, ClusterReady):
                    kill_container(lab, 2, worker)
    finally:
        await pool.close()
    assert failed.value.rank == 1 and failed.value.node == lab.node(2).name
    assert "rank 1" in failed.value.message and failed.value.remedy
    by_rank = {
        (e.rank, e.state): e
        for e in events
        if isinstance(e, RankStateChanged) and e.state in (RankState.FAILED, RankState.STOPPED)
    }
    assert (1, RankState.FAILED) in by_rank and by_rank[(1, RankState.FAILED)].reason
    assert (0, RankState.STOPPED) in by_rank, "the head is stopped"
    assert containers(lab.node(1).docker_socket) == []


async def test_log_stream_resumes_after_an_sshd_restart_without_loss_or_repeat(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    from spark_tui.ops.cluster import stop
    from spark_tui.ops.logs import FollowUpdate, RankLogFollower
    from spark_tui.remote.docker_remote import RemoteDocker
    from spark_tui.remote.ssh import Outage

    pool = lab_pool(lab_nodes)
    await pool.open()
    try:
        plan = await lab_plan(pool, RECIPE)
        _ = [ev async for ev in _launch_events(plan, pool)]
        head = plan.ranks[0].container.name
        api = f"http://{lab.node(1).address}:{plan.endpoint['port']}"
        rd = await RemoteDocker.open(pool[lab.node(1).name])
        follower = RankLogFollower(rd, head, tail="all")
        got: list[str] = []

        def collect(item: FollowUpdate) -> None:
            if not isinstance(item, Outage):
                got.append(f"{item.stamp} {item.text}")

        task = asyncio.create_task(follower.follow(collect))
        # Traffic straight to the head (not through SSH), so lines keep coming while the
        # node's sshd is gone: each request leaves a line in the head's log.
        async with httpx.AsyncClient(timeout=5) as client:
            for i in range(3):
                await client.get(f"{api}/v1/models?before={i}")
            await asyncio.sleep(0.3)
            restart = asyncio.create_task(asyncio.to_thread(lab.restart_sshd, 1))
            while not restart.done():
                await client.get(f"{api}/v1/models?during")
                await asyncio.sleep(0.05)
            await restart
            for i in range(3):
                await client.get(f"{api}/v1/models?after={i}")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("after=2" in g for g in got):
            await asyncio.sleep(0.2)
        assert follower.resumes >= 1, "the stream was broken by the restart and resumed"
        follower.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

        # Compare with the container's whole log, read from the node's own socket.
        client = docker.DockerClient(base_url=f"unix://{lab.node(1).docker_socket}")
        full = client.containers.get(head).logs(timestamps=True).decode().splitlines()
        client.close()
        full = [ln.rstrip("\r") for ln in full]
        assert any("during" in ln for ln in got), "lines logged while sshd was down arrive"
        assert len(got) == len(set(got)), "no line is repeated"
        assert got == full[: len(got)], "no line is lost and the order is kept"
        await rd.close()
        await stop(pool, plan.cluster_id)
    finally:
        await pool.close()


async def test_a_fresh_process_attaches_and_stop_leaves_no_container(
    lab: Lab, lab_nodes: list[InventoryNode], inventory: Path
) -> None:
    pool = lab_pool(lab_nodes)
    await pool.open()
    try:
        plan = await lab_plan(pool, RECIPE)
        _ = [ev async for ev in _launch_events(plan, pool, wait_ready=False)]
    finally:
        await pool.close()  # this "spark-tui" goes away; the cluster keeps running

    status = cli("status", "--inventory", str(inventory), "--json")
    assert status.returncode == 0, status.stderr
    assert plan.cluster_id in status.stdout

    script = (
        "import asyncio, faulthandler, sys\n"
        "faulthandler.dump_traceback_later(40)\n"
        "from spark_tui.core.inventory import parse_inventory\n"
        "from spark_tui.remote.ssh import ConnectionPool\n"
        "from spark_tui.ops.attach import attach\n"
        "from spark_tui.service.event_stream import streamed\n"
        "from spark_tui.ops.events import ClusterReady, LogLine, Notice\n"
        "async def main():\n"
        "    pool = ConnectionPool(parse_inventory(open(sys.argv[1]).read()), ssh_config=())\n"
        "    await pool.open()\n"
        "    ranks = set()\n"
        "    try:\n"
        "        ready = False\n"
        "        async for ev in streamed(attach, pool, follow=True, ready_timeout=60):\n"
        "            if isinstance(ev, Notice): print('NOTICE', ev.message)\n"
        "            if isinstance(ev, LogLine): ranks.add(ev.rank)\n"
        "            if isinstance(ev, ClusterReady): print('READY', ev.cluster_id)\n"
        "            ready = ready or isinstance(ev, ClusterReady)\n"
        "            if ready and ranks == {0, 1}: break\n"
        "    finally:\n"
        "        await pool.close()\n"
        "    print('RANKS', sorted(ranks))\n"
        "asyncio.run(main())\n"
    )
    try:
        attached = subprocess.run(
            [sys.executable, "-c", script, str(inventory)],
            capture_output=True,
            text=True,
            timeout=45,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"attach did not finish: {exc.stdout!r} {exc.stderr!r}")
    assert attached.returncode == 0, attached.stderr
    assert f"READY {plan.cluster_id}" in attached.stdout
    assert "RANKS [0, 1]" in attached.stdout

    stopped = cli("stop", "--inventory", str(inventory))
    assert stopped.returncode == 0, stopped.stderr
    for node in lab.nodes:
        assert containers(node.docker_socket) == [], f"a container is left on {node.name}"


def test_one_node_down_is_a_clear_error_and_nothing_runs(lab: Lab, inventory: Path) -> None:
    lab.stop_sshd(2)
    try:
        # Unknown fit (the stand-in nodes cache no config of this model): insist, as a user must.
        res = cli("launch", RECIPE, "--inventory", str(inventory), "--wait", "--force")
    finally:
        lab.start_sshd(2)
    assert res.returncode == 3, res.stdout + res.stderr
    assert lab.node(2).name in res.stderr and "remedy:" in res.stderr
    assert "Traceback" not in res.stderr
    for node in lab.nodes:
        assert containers(node.docker_socket) == [], f"something runs on {node.name}"

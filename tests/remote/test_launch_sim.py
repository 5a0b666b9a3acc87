"""Launch, watch, fail, stop, status and attach on simulated Sparks (spark_tui.sim.nodes)."""

from __future__ import annotations

import httpx
import pytest

from spark_tui.core.errors import OperationFailed
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import LaunchPlan, build_plan
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.attach import attach, find_api
from spark_tui.ops.cluster import close_dockers, open_dockers, status, stop
from spark_tui.ops.events import (
    ClusterEvent,
    ClusterReady,
    LogLine,
    Notice,
    RankState,
    RankStateChanged,
)
from spark_tui.ops.launch import LaunchFailed, StaleContainer, launch
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.probe import probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.service.event_stream import streamed
from spark_tui.sim.nodes import SimCluster

SECRET = "hf_sim_secret_value_123"
ENV = {"HF_TOKEN": SECRET}


async def make_plan(pool: ConnectionPool, recipe: str = "glm-5.3-flash", sets=()) -> LaunchPlan:
    facts = await probe_pool(pool)
    r = find_recipe(recipe)
    return build_plan(r, apply_overrides(r, list(sets)), facts)


def states(events: list[ClusterEvent], rank: int) -> list[RankState]:
    return [e.state for e in events if isinstance(e, RankStateChanged) and e.rank == rank]


async def containers(pool: ConnectionPool) -> list[str]:
    dockers = await open_dockers(pool)
    try:
        found = []
        for d in dockers.values():
            found += [c.name for c in await d.containers(["spark-tui.cluster"])]
        return found
    finally:
        await close_dockers(dockers)


def pool_for(sim: SimCluster) -> ConnectionPool:
    return ConnectionPool(sim.inventory, ssh_config=None, backoff_initial=0.05)


async def test_launch_to_ready_then_stop(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        events = [
            ev
            async for ev in streamed(
                launch, plan, pool, follow=False, ready_timeout=60, local_env=ENV
            )
        ]
        ready = [e for e in events if isinstance(e, ClusterReady)]
        assert len(ready) == 1 and ready[0].cluster_id == plan.cluster_id
        for rank in (0, 1):
            seq = states(events, rank)
            assert seq[:2] == [RankState.CREATED, RankState.STARTING]
            assert RankState.LOADING in seq and seq[-1] is RankState.READY
            assert sum(isinstance(e, LogLine) and e.rank == rank for e in events) > 10
        # The head's log says its API came up; the worker's was streamed too.
        assert any(isinstance(e, LogLine) and e.rank == 0 and e.kind == "ready" for e in events)
        # The secret reached the containers but no event.
        assert SECRET not in repr(events)
        dockers = await open_dockers(pool)
        try:
            envs = []
            for rank in plan.ranks:
                info = await dockers[rank.node].inspect(rank.container.name)
                assert info is not None
                envs.append(dict(kv.split("=", 1) for kv in info["Config"]["Env"]))
        finally:
            await close_dockers(dockers)
        head_env, worker_env = envs
        assert worker_env["HF_TOKEN"] == SECRET
        # Every rank carries its own node's interface names, never the head's.
        assert worker_env["NCCL_SOCKET_IFNAME"] == plan.ranks[1].env["NCCL_SOCKET_IFNAME"]
        assert worker_env["NCCL_SOCKET_IFNAME"] != head_env["NCCL_SOCKET_IFNAME"]
        assert worker_env["GLOO_SOCKET_IFNAME"] == worker_env["NCCL_SOCKET_IFNAME"]
        # The API answers through the SSH forward.
        async with httpx.AsyncClient() as client:
            resp = await client.get(ready[0].base_url + "/health")
            assert resp.status_code == 200
            models = await client.get(ready[0].base_url + "/v1/models")
            assert models.json()["data"]
        report = await stop(pool)
        assert sorted(report.removed) == sorted((r.node, r.container.name) for r in plan.ranks)
        assert report.left == []
        assert await containers(pool) == []


async def test_worker_killed_head_stopped_failure_explained(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        worker = plan.ranks[1]
        events: list[ClusterEvent] = []
        with pytest.raises(LaunchFailed) as err:
            async for ev in streamed(
                launch, plan, pool, ready_timeout=60, settle=1.5, local_env=ENV
            ):
                events.append(ev)
                if isinstance(ev, ClusterReady):
                    docker = await RemoteDocker.open(pool[worker.node])
                    await docker.kill(worker.container.name)
                    await docker.close()
        assert err.value.rank == 1 and err.value.node == worker.node
        assert "killed" in err.value.message
        failed = [
            e for e in events if isinstance(e, RankStateChanged) and e.state is RankState.FAILED
        ]
        assert failed[0].rank == 1 and failed[0].reason and "killed" in failed[0].reason
        assert all(f.explaining_lines for f in failed)
        # The head is stopped: failed on its own within the settle time, or removed.
        assert states(events, 0)[-1] in (RankState.FAILED, RankState.STOPPED)
        assert await containers(pool) == []


async def test_status_and_attach_from_a_fresh_pool(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        async with pool_for(sim) as pool:
            plan = await make_plan(pool)
            async for _ev in streamed(
                launch, plan, pool, follow=False, ready_timeout=60, local_env=ENV
            ):
                pass
        # A fresh process: a new pool finds the cluster by its labels.
        async with pool_for(sim) as pool:
            (found,) = await status(pool)
            assert found.cluster_id == plan.cluster_id
            assert found.recipe == "glm-5.3-flash" and found.state == "running"
            assert [(r.rank, r.node) for r in found.ranks] == [(r.rank, r.node) for r in plan.ranks]
            assert found.to_dict()["nodes"] == [r.node for r in plan.ranks]
            events = [
                ev async for ev in streamed(attach, pool, tail=20, follow=False, ready_timeout=30)
            ]
            assert isinstance(events[0], Notice) and plan.cluster_id in events[0].message
            for rank in (0, 1):
                assert 0 < sum(isinstance(e, LogLine) and e.rank == rank for e in events)
                assert states(events, rank)[-1] is RankState.READY
            assert any(isinstance(e, ClusterReady) for e in events)
            api = await find_api(pool)
            async with httpx.AsyncClient() as client:
                assert (await client.get(api.base_url + "/health")).status_code == 200
            assert api.ranks[0]["argv"][:2] == ["vllm", "serve"]
            await stop(pool)


async def test_stale_containers_need_a_yes(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        async for _ in streamed(launch, plan, pool, wait_ready=False, follow=False, local_env=ENV):
            pass
        with pytest.raises(OperationFailed) as err:
            async for _ in streamed(launch, plan, pool, wait_ready=False, follow=False):
                pass
        assert "earlier launch" in err.value.message and "--replace" in err.value.remedy
        asked: list[list[StaleContainer]] = []

        async def no(stale: list[StaleContainer]) -> bool:
            asked.append(stale)
            return False

        with pytest.raises(OperationFailed):
            async for _ in streamed(
                launch, plan, pool, replace_stale=no, wait_ready=False, follow=False
            ):
                pass
        assert sorted(s.name for s in asked[0]) == sorted(r.container.name for r in plan.ranks)
        assert len(await containers(pool)) == 2  # kept, as the user said

        async def yes(stale: list[StaleContainer]) -> bool:
            return True

        async for _ in streamed(
            launch, plan, pool, replace_stale=yes, wait_ready=False, follow=False
        ):
            pass
        assert len(await containers(pool)) == 2
        await stop(pool)


async def test_name_clash_with_a_foreign_container_is_refused(sim_scenario) -> None:
    from spark_tui.core.plan import ContainerSpec

    async with SimCluster(sim_scenario(2)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        head = plan.ranks[0]
        docker = await RemoteDocker.open(pool[head.node])
        foreign = ContainerSpec(
            name=head.container.name,
            image=head.container.image,
            labels={},
            env={},
            mounts={},
            command=["sh", "-c", "sleep 30"],
        )
        await docker.create(foreign, {})
        try:
            with pytest.raises(OperationFailed) as err:
                async for _ in streamed(
                    launch, plan, pool, replace_stale=lambda s: _true(), follow=False
                ):
                    pass
            assert "did not start" in err.value.message and head.node in err.value.message
            assert await docker.inspect(head.container.name) is not None  # left alone
        finally:
            await docker.remove(head.container.name, stop_timeout=1)
            await docker.close()


async def _true() -> bool:
    return True


async def test_differing_images_refuse_the_launch_before_any_rank_starts(sim_scenario) -> None:
    # Ranks running different builds of one image fail in ways no log explains: both nodes
    # are named, and nothing is started.
    async with SimCluster(sim_scenario(2, odd_digest_node=2)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        events = []
        with pytest.raises(OperationFailed) as err:
            async for ev in streamed(
                launch, plan, pool, wait_ready=False, follow=False, local_env=ENV
            ):
                events.append(ev)
        head, other = plan.ranks[0].node, plan.ranks[1].node
        assert f"differs between nodes: {other} has sha256:" in err.value.message
        assert f"the head {head} has sha256:" in err.value.message
        assert err.value.message.endswith("no rank was started")
        assert "images sync" in err.value.remedy
        assert not any(isinstance(e, RankStateChanged) for e in events)
        assert await containers(pool) == []


@pytest.mark.parametrize(
    ("recipe", "sets"),
    [("glm-5.3-flash", ["data_parallel=2"]), ("gpt-oss-120b", ["data_parallel=4"])],
    ids=["tp2xdp2", "dp4"],
)
async def test_four_nodes_data_parallel(sim_scenario, recipe: str, sets: list[str]) -> None:
    # vLLM's internally balanced form: one API (the head's), every other rank headless.
    async with SimCluster(sim_scenario(4)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool, recipe, sets=sets)
        assert len(plan.ranks) == 4
        assert [r.serves_api for r in plan.ranks] == [True, False, False, False]
        events = [
            ev
            async for ev in streamed(
                launch, plan, pool, follow=False, ready_timeout=60, local_env=ENV
            )
        ]
        assert any(isinstance(e, ClusterReady) for e in events)
        for rank in range(4):
            assert states(events, rank)[-1] is RankState.READY
        await stop(pool)
        assert await containers(pool) == []


async def test_forced_launch_that_does_not_fit_fails_with_vllms_words(sim_scenario) -> None:
    # The 128 GB recipe on 64 GB nodes: the engine refuses, as vLLM does, and says why.
    async with SimCluster(sim_scenario(2, memory_gb=64)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        events: list[ClusterEvent] = []
        with pytest.raises(LaunchFailed) as err:
            async for ev in streamed(launch, plan, pool, ready_timeout=60, local_env=ENV):
                events.append(ev)
        assert err.value.lines
        assert any("memory" in line.lower() for line in err.value.lines)
        failed = [
            e for e in events if isinstance(e, RankStateChanged) and e.state is RankState.FAILED
        ]
        assert failed and all(e.explaining_lines for e in failed)
        assert await containers(pool) == []


async def test_dropped_link_during_launch_loses_and_repeats_no_line(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2, pace=0.05)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        worker = plan.ranks[1]
        lines: dict[int, list[str]] = {0: [], 1: []}
        dropped = False
        async for ev in streamed(launch, plan, pool, follow=False, ready_timeout=60, local_env=ENV):
            if isinstance(ev, LogLine):
                lines[ev.rank].append(ev.text)
            if (
                not dropped
                and isinstance(ev, RankStateChanged)
                and ev.rank == 1
                and ev.state is RankState.LOADING
                and (ev.progress or 0) > 0.2
            ):
                pool[worker.node].connection.abort()  # the worker's link drops mid-load
                dropped = True
        assert dropped and pool[worker.node].reconnects >= 1
        docker = await RemoteDocker.open(pool[worker.node])
        try:
            logged = [r.text for r in await docker.logs(worker.container.name)]
        finally:
            await docker.close()
        assert len(lines[1]) > 20
        assert lines[1] == logged[: len(lines[1])]
        await stop(pool)

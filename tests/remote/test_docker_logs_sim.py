"""Docker over SSH on a simulated node: containers, pulls, and log streams that survive a
dropped connection without losing or repeating a line."""

from __future__ import annotations

import asyncio
import threading

import pytest

from spark_tui.core.errors import OperationFailed
from spark_tui.core.plan import ContainerSpec, DockerOptions
from spark_tui.ops.logs import FollowUpdate, RankLogFollower
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.ssh import ConnectionPool, Outage
from spark_tui.sim.nodes import SimCluster

LABELS = {"spark-tui.cluster": "logtest", "spark-tui.rank": "0"}


def shell_spec(name: str, image: str, script: str) -> ContainerSpec:
    return ContainerSpec(
        name=name,
        image=image,
        labels=dict(LABELS),
        env={"GREETING": "hi"},
        mounts={},
        docker=DockerOptions(),
        command=["sh", "-c", script],
    )


async def test_container_lifecycle_and_labels(sim_scenario) -> None:
    async with SimCluster(sim_scenario(1)) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
            docker = await RemoteDocker.open(pool.connections[0])
            try:
                image = (await docker.images())[0].ref
                spec = shell_spec("spark-tui-logtest-r0", image, 'echo "$GREETING"; sleep 30')
                await docker.create(spec, spec.env)
                await docker.start(spec.name)
                ours = await docker.containers(["spark-tui.cluster=logtest"])
                assert [(c.name, c.state) for c in ours] == [(spec.name, "running")]
                assert ours[0].labels["spark-tui.rank"] == "0"
                assert await docker.containers(["spark-tui.cluster=other"]) == []
                for _ in range(50):
                    if [r.text for r in await docker.logs(spec.name)] == ["hi"]:
                        break
                    await asyncio.sleep(0.05)
                assert [r.text for r in await docker.logs(spec.name)] == ["hi"]
                assert await docker.remove(spec.name, stop_timeout=1) is True
                assert await docker.inspect(spec.name) is None
                assert await docker.remove(spec.name) is False
            finally:
                await docker.close()


async def test_missing_image_without_registry_is_a_clear_error(sim_scenario) -> None:
    async with SimCluster(sim_scenario(1)) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
            docker = await RemoteDocker.open(pool.connections[0])
            try:
                assert await docker.image("example.invalid/nothing:1") is None
                seen: list[str] = []
                with pytest.raises(OperationFailed) as err:
                    await docker.pull("example.invalid/nothing:1", seen.append)
                assert "could not be pulled" in err.value.message
                assert "docker save example.invalid/nothing:1" in err.value.remedy
            finally:
                await docker.close()


async def test_log_follow_resumes_after_drop_without_loss_or_repeat(sim_scenario) -> None:
    # 400 lines, two of them repeated verbatim (they must survive deduplication).
    script = (
        'i=0; while [ $i -lt 400 ]; do i=$((i+1)); echo "line $i"; '
        'if [ $i = 150 ]; then echo "same"; echo "same"; fi; sleep 0.002; done'
    )
    expected = [f"line {i}" for i in range(1, 151)] + ["same", "same"]
    expected += [f"line {i}" for i in range(151, 401)]
    async with SimCluster(sim_scenario(1)) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None, backoff_initial=0.05) as pool:
            conn = pool.connections[0]
            docker = await RemoteDocker.open(conn)
            try:
                image = (await docker.images())[0].ref
                spec = shell_spec("spark-tui-logtest-r0", image, script)
                await docker.create(spec, spec.env)
                await docker.start(spec.name)
                follower = RankLogFollower(docker, spec.name, resume_pause=0.02)
                got: list[str] = []
                drops = 0

                def seen(item: FollowUpdate) -> None:
                    nonlocal drops
                    if isinstance(item, Outage):
                        return
                    got.append(item.text)
                    if len(got) in (60, 200):
                        conn.connection.abort()  # the link drops mid-stream
                        drops += 1

                await follower.follow(seen)
                assert drops == 2
                assert follower.resumes >= 1
                assert conn.reconnects >= 1
                assert got == expected
                await docker.remove(spec.name, stop_timeout=1)
            finally:
                await docker.close()


async def test_docker_calls_of_many_nodes_run_at_once(sim_scenario) -> None:
    # A probe or a stop of N nodes makes N Docker calls together, each mostly waiting on
    # its node: 33 calls (more than any machine's default thread pool holds) all in
    # progress at once, none queued behind the others.
    calls = 33
    together = threading.Barrier(calls, timeout=30)
    async with SimCluster(sim_scenario(1)) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
            docker = await RemoteDocker.open(pool.connections[0])
            try:
                got = await asyncio.gather(
                    *(docker.call(lambda c: together.wait(), "wait") for _ in range(calls))
                )
            finally:
                await docker.close()
    assert sorted(got) == list(range(calls))

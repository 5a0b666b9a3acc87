"""Faults a real cluster meets, on the namespace lab (real sshd + dockerd): a node's sshd
gone for a while (a link drop is not a failure), interrupts at every phase of a launch
(nothing is left behind), a rank that ignores SIGTERM (stop still ends it), and the lab's
own runc wrapper (silent, and `docker exec` works)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from labkit import Lines, lab_guard
from labkit import all_containers as _all_containers
from labkit import container_log as _texts
from labkit import ensure_sshd as _ensure_sshd
from labkit import socket_dirs as _socket_dirs
from labkit import spark_tui as _spark_tui
from labkit import until as _until

from spark_tui.core.inventory import InventoryNode
from spark_tui.ops.events import (
    ClusterEvent,
    ClusterReady,
    LogLine,
    NodeReachable,
    NodeUnreachable,
    RankState,
    RankStateChanged,
)
from spark_tui.service.event_stream import streamed
from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.image import LAB_IMAGE

lab_guard()

pytestmark = pytest.mark.lab


def _client(lab: Lab, index: int) -> docker.DockerClient:
    return docker.DockerClient(base_url=f"unix://{lab.node(index).docker_socket}")


@pytest.fixture(autouse=True)
def _no_containers_left(lab: Lab) -> Iterator[None]:
    """Every test starts and ends with no container on any node."""
    yield
    left = {}
    for node in lab.nodes:  # clean up for the next test even when this one failed
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        left[node.name] = [c.name for c in client.containers.list(all=True)]
        for c in client.containers.list(all=True):
            c.remove(force=True)
        client.close()
    assert not any(left.values()), f"containers left behind: {left}"


def test_docker_exec_works_in_a_rank_like_container_and_its_log_starts_clean(lab: Lab) -> None:
    """A container with the playbook's limits (nofile 1048576, privileged) runs, `docker
    exec` into it works, and the lab's runc wrapper wrote nothing into its log."""
    client = _client(lab, 1)
    c = None
    try:
        c = client.containers.run(
            LAB_IMAGE,
            ["sh", "-c", "echo started; exec sleep 600"],
            name="lab-exec-check",
            network_mode="host",
            privileged=True,
            ulimits=[docker.types.Ulimit(name="nofile", soft=1048576, hard=1048576)],
            detach=True,
        )
        code, out = c.exec_run(["sh", "-c", "echo inside"])
        assert code == 0, out.decode()
        assert out.decode().strip() == "inside"
        log = c.logs().decode()
        assert log.splitlines()[:1] == ["started"], log
    finally:
        if c is not None:
            c.remove(force=True)
        client.close()


# --- a link drop is not a failure ---------------------------------------------------------

RECIPE = "glm-5.3-flash"


@pytest.fixture(scope="module")
def inventory(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lab-resilience") / "lab.yaml"
    lab.write_inventory(path)
    return path


def _pool(nodes: list[InventoryNode]) -> Any:
    from spark_tui.remote.ssh import ConnectionPool

    return ConnectionPool(nodes, ssh_config=(), connect_timeout=5, backoff_max=1.0)


async def _plan(pool: Any) -> Any:
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.plan import build_plan
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.remote.probe import probe_pool

    recipe = find_recipe(RECIPE)
    facts = await probe_pool(pool)
    return build_plan(recipe, apply_overrides(recipe, []), facts)


def _head_api(lab: Lab, plan: Any) -> str:
    """The head's API straight across the lab bridge (not through SSH): requests keep
    landing, and leaving lines in its log, while the node's sshd is down."""
    return f"http://{lab.node(1).address}:{plan.endpoint['port']}"


def _running(lab: Lab) -> dict[str, list[str]]:
    out = {}
    for node in lab.nodes:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        out[node.name] = sorted(c.name for c in client.containers.list() if c.status == "running")
        client.close()
    return out


async def test_an_sshd_outage_after_ready_is_a_state_and_the_cluster_keeps_running(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    """Ready, then the head node's sshd (listener and sessions) is gone for 8 s: the watch
    reports the node unreachable on every retry, fails no rank, stops nothing, and once the
    node is back its log resumes (lines logged during the outage arrive)."""
    from spark_tui.ops.cluster import stop
    from spark_tui.ops.launch import launch

    pool = _pool(lab_nodes)
    await pool.open()
    events: list[ClusterEvent] = []
    try:
        plan = await _plan(pool)
        api = _head_api(lab, plan)
        agen = streamed(launch, plan, pool, follow=True, ready_timeout=60, settle=0.5)

        async def consume() -> None:
            async for ev in agen:
                events.append(ev)

        task = asyncio.create_task(consume())
        await _until(lambda: any(isinstance(e, ClusterReady) for e in events), 60, "ready")
        async with httpx.AsyncClient(timeout=5) as client:
            await asyncio.to_thread(lab.stop_sshd, 1)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 8:
                with contextlib.suppress(httpx.HTTPError):  # (a torn-down head says so below)
                    await client.get(f"{api}/v1/models?during-outage")
                await asyncio.sleep(0.5)
            await asyncio.to_thread(lab.start_sshd, 1)
            await _until(lambda: any(isinstance(e, NodeReachable) for e in events), 30, "node back")
            await client.get(f"{api}/v1/models?after-outage")
        await _until(
            lambda: any(isinstance(e, LogLine) and "after-outage" in e.text for e in events),
            30,
            "a line logged after the outage",
        )
        assert not task.done(), "the watch is still running"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await agen.aclose()

        down = [e for e in events if isinstance(e, NodeUnreachable)]
        assert down and {e.node for e in down} == {lab.node(1).name}
        assert down[-1].seconds >= 5 and down[-1].attempts >= 3, down[-1]
        assert all(e.ranks == (0,) and e.reason and e.remedy for e in down)
        bad = [
            e
            for e in events
            if isinstance(e, RankStateChanged) and e.state in (RankState.FAILED, RankState.STOPPED)
        ]
        assert bad == [], f"an outage failed or stopped a rank: {bad}"
        texts = [e.text for e in events if isinstance(e, LogLine) and e.rank == 0]
        assert any("during-outage" in t for t in texts), "lines of the outage arrive"
        assert len([t for t in texts if "after-outage" in t]) == 1, "and none twice"
        assert _running(lab) == {
            lab.node(1).name: [plan.ranks[0].container.name],
            lab.node(2).name: [plan.ranks[1].container.name],
        }
        report = await stop(pool, plan.cluster_id)
        assert report.ok
    finally:
        _ensure_sshd(lab, 1)
        await pool.close()


async def test_give_up_ends_the_watch_and_leaves_the_ranks(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    """The consumer may stop waiting for a node: the watch then ends with an error that
    names the node and how to stop the ranks, and no rank is touched."""
    from spark_tui.core.errors import UnreachableError
    from spark_tui.ops.cluster import stop
    from spark_tui.ops.launch import launch

    pool = _pool(lab_nodes)
    await pool.open()
    try:
        plan = await _plan(pool)
        with pytest.raises(UnreachableError) as lost:
            async for ev in streamed(launch, plan, pool, follow=True, ready_timeout=60, settle=0.5):
                if isinstance(ev, ClusterReady):
                    await asyncio.to_thread(lab.stop_sshd, 2)
                if isinstance(ev, NodeUnreachable) and ev.attempts >= 2:
                    ev.give_up()
        assert lab.node(2).name in lost.value.message
        assert "spark-tui stop" in lost.value.remedy
        lab.start_sshd(2)
        assert _running(lab) == {
            lab.node(1).name: [plan.ranks[0].container.name],
            lab.node(2).name: [plan.ranks[1].container.name],
        }
        await pool.close()
        pool = _pool(lab_nodes)
        await pool.open()
        assert (await stop(pool, plan.cluster_id)).ok
    finally:
        _ensure_sshd(lab, 2)
        await pool.close()


async def test_logs_follow_survives_a_15s_sshd_outage_without_loss_or_repeat(
    lab: Lab, lab_nodes: list[InventoryNode], inventory: Path
) -> None:
    """`logs --follow` while the head node's sshd is gone for 15 s: it does not exit, the
    healthy rank's stream goes on, and every rank's followed lines are exactly its
    container's log (nothing lost, nothing twice). SIGTERM then ends it and its socket
    folders go with it."""
    pool = _pool(lab_nodes)
    await pool.open()
    try:
        plan = await _plan(pool)
        _ = [ev async for ev in _launch(plan, pool)]
    finally:
        await pool.close()
    api = _head_api(lab, plan)
    follow = _spark_tui("logs", "--follow", "--tail", "0", "--inventory", str(inventory))
    out, err = Lines(follow.stdout), Lines(follow.stderr)
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            for i in range(3):
                await client.get(f"{api}/v1/models?before={i}")
            await _until(lambda: out.has("before=2"), 30, "the follower's first lines")
            await asyncio.to_thread(lab.stop_sshd, 1)
            assert lab.sshd_pids(1) == set(), "node 1's sshd and its sessions are gone"
            t0 = time.monotonic()
            n = 0
            while time.monotonic() - t0 < 15:
                await client.get(f"{api}/v1/models?during={n}")
                n += 1
                await asyncio.sleep(0.25)
            assert follow.poll() is None, "logs --follow is still running: " + err.join(1)
            await asyncio.to_thread(lab.start_sshd, 1)
            for i in range(3):
                await client.get(f"{api}/v1/models?after={i}")
        await _until(lambda: out.has("after=2"), 60, "the lines after the outage")
        assert follow.poll() is None, "logs --follow is still running: " + err.join(1)
        pid = follow.pid
        assert _socket_dirs(pid), "the follower forwards the Docker sockets"
        follow.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(follow.wait, 30)
    finally:
        if follow.poll() is None:
            follow.kill()
        _ensure_sshd(lab, 1)
    stderr = err.join()
    assert code == 143, stderr
    assert _socket_dirs(pid) == [], "SIGTERM left socket folders"
    assert "unreachable since" in stderr and "reachable again" in stderr, (
        stderr + "\n--- stdout:\n" + "\n".join(out.lines[-20:])
    )
    assert "ended)" not in stderr, "no rank's stream ended"
    assert "Traceback" not in stderr
    for rank, index in ((0, 1), (1, 2)):
        prefix = f"[{rank} {lab.node(index).name}] "
        got = [ln[len(prefix) :] for ln in out.join().split("\n") if ln.startswith(prefix)]
        full = _texts(lab, index, plan.ranks[rank].container.name)
        assert got, f"rank {rank} was followed"
        assert got == full[: len(got)], f"rank {rank}: a line lost, repeated or out of order"
    head_got = [ln for ln in out.lines if ln.startswith("[0 ")]
    assert sum("during=" in ln for ln in head_got) == n, "every line of the outage arrives"
    await _stop_all(lab_nodes)


async def _launch(plan: Any, pool: Any) -> AsyncIterator[ClusterEvent]:
    from spark_tui.ops.launch import launch

    async for ev in streamed(launch, plan, pool, wait_ready=True, follow=False, ready_timeout=60):
        yield ev


async def _stop_all(nodes: list[InventoryNode]) -> None:
    from spark_tui.ops.cluster import stop

    pool = _pool(nodes)
    await pool.open()
    try:
        assert (await stop(pool)).ok
    finally:
        await pool.close()


# --- interrupts leave nothing -------------------------------------------------------------


async def _launch_and_signal(
    inventory: Path,
    marker: str,
    delay: float,
    signals: list[int],
    gap: float = 0.05,
    env: dict[str, str] | None = None,
) -> tuple[int, str, int]:
    """`spark-tui launch --wait` as the user runs it; once `marker` shows on its stderr,
    wait `delay` s and send `signals` (`gap` s apart). Returns (exit code, stderr, pid)."""
    # The lab's stand-in nodes cache no config of this recipe's model: its fit is unknown,
    # which a launch refuses unless insisted on.
    proc = _spark_tui(
        "launch",
        RECIPE,
        "--inventory",
        str(inventory),
        "--wait",
        "--force",
        env=None if env is None else {**os.environ, **env},
    )
    err = Lines(proc.stderr)
    Lines(proc.stdout)
    try:
        await _until(lambda: err.has(marker) or proc.poll() is not None, 60, repr(marker))
        assert proc.poll() is None, f"the launch ended before {marker!r}: {err.join(1)}"
        await asyncio.sleep(delay)
        for i, sig in enumerate(signals):
            if i:
                await asyncio.sleep(gap)
            proc.send_signal(sig)
        code = await asyncio.to_thread(proc.wait, 90)
    finally:
        if proc.poll() is None:
            proc.kill()
    return code, err.join(), proc.pid


# Phases of a launch as its progress lines show them (the launch cannot be ready before
# any of these: the engine is still loading).
PHASES = [
    ("connecting to", 0.0),
    ("fit:", 0.0),
    # The plan is made, no container yet (then 0.1 s later, while the first is created).
    ("as cluster", 0.0),
    ("as cluster", 0.1),
    ("rank 0 spark-lab-1: created", 0.0),
    ("rank 1 spark-lab-2: starting", 0.0),
    ("started in", 0.0),
]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize(("marker", "delay"), PHASES, ids=[f"{m}+{d}" for m, d in PHASES])
async def test_an_interrupt_at_any_phase_of_launch_leaves_no_container(
    lab: Lab, inventory: Path, marker: str, delay: float, sig: int
) -> None:
    code, stderr, pid = await _launch_and_signal(inventory, marker, delay, [sig])
    assert code == 128 + sig, stderr
    assert _all_containers(lab) == {n.name: [] for n in lab.nodes}, stderr
    assert _socket_dirs(pid) == [], "the interrupted launch left socket folders"
    assert "Traceback" not in stderr


# A first launch of the image (no flag table kept): the image's `vllm serve --help=all` runs
# in a container of the cluster's while the launch goes on, maybe beside the ranks.
FIRST_LAUNCH_PHASES = [("fit:", 0.0), ("as cluster", 0.0), ("rank 0 spark-lab-1: created", 0.0)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize(
    ("marker", "delay"), FIRST_LAUNCH_PHASES, ids=[f"{m}+{d}" for m, d in FIRST_LAUNCH_PHASES]
)
async def test_an_interrupt_during_a_first_launch_leaves_no_help_container(
    lab: Lab, inventory: Path, tmp_path: Path, marker: str, delay: float, sig: int
) -> None:
    cache = {"SPARK_TUI_CACHE_DIR": str(tmp_path / "empty-cache")}
    code, stderr, pid = await _launch_and_signal(inventory, marker, delay, [sig], env=cache)
    assert code == 128 + sig, stderr
    assert _all_containers(lab) == {n.name: [] for n in lab.nodes}, stderr
    assert _socket_dirs(pid) == [], "the interrupted launch left socket folders"
    assert "Traceback" not in stderr, stderr


async def test_a_double_ctrl_c_still_cleans_up_and_says_so(lab: Lab, inventory: Path) -> None:
    code, stderr, pid = await _launch_and_signal(
        inventory, "as cluster", 0.1, [signal.SIGINT, signal.SIGINT]
    )
    assert code == 130, stderr
    assert "still cleaning up" in stderr
    assert _all_containers(lab) == {n.name: [] for n in lab.nodes}, stderr
    assert "nothing of cluster" in stderr, stderr
    assert _socket_dirs(pid) == []


async def test_a_triple_ctrl_c_says_exactly_what_is_left_and_how_to_remove_it(
    lab: Lab, inventory: Path
) -> None:
    code, stderr, pid = await _launch_and_signal(
        inventory, "rank 1 spark-lab-2: starting", 0.0, [signal.SIGINT] * 3, gap=0.02
    )
    try:
        assert code == 130, stderr
        assert "Traceback" not in stderr
        left = [name for names in _all_containers(lab).values() for name in names]
        for name in left:
            assert name in stderr, f"{name} is left but not named: {stderr}"
        if left:
            assert f"spark-tui stop --inventory {inventory}" in stderr, stderr
        else:
            assert "nothing of cluster" in stderr, stderr
        assert _socket_dirs(pid) == []
    finally:
        for node in lab.nodes:  # (what the message says to do)
            client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
            for c in client.containers.list(all=True):
                c.remove(force=True)
            client.close()


# --- stop escalates -----------------------------------------------------------------------


def test_stop_kills_a_rank_that_ignores_sigterm_and_says_so(lab: Lab, inventory: Path) -> None:
    """Real vLLM waiting for a peer ignores SIGTERM: `stop` must still end the rank
    (SIGKILL after the grace period) and say that it had to."""
    from spark_tui.ops.cluster import CLUSTER_LABEL, RANK_LABEL, ROLE_LABEL

    client = _client(lab, 2)
    try:
        client.containers.run(
            LAB_IMAGE,
            ["sh", "-c", 'trap "" TERM; echo waiting for a peer; while :; do sleep 1; done'],
            name="spark-tui-deaf-r1",
            labels={CLUSTER_LABEL: "deaf", RANK_LABEL: "1", ROLE_LABEL: "worker"},
            network_mode="host",
            detach=True,
        )
    finally:
        client.close()
    res = subprocess.run(
        [sys.executable, "-m", "spark_tui", "stop", "--inventory", str(inventory)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "removed spark-tui-deaf-r1 on spark-lab-2" in res.stdout
    assert "spark-tui-deaf-r1 on spark-lab-2 ignored SIGTERM" in res.stderr, res.stderr
    assert _all_containers(lab) == {n.name: [] for n in lab.nodes}

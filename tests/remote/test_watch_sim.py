"""The watch after ready, and `status` of a dead cluster, on simulated Sparks."""

from __future__ import annotations

import asyncio
import json
import signal
import sys

import httpx

from spark_tui import cli
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import LaunchPlan, build_plan
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.events import (
    ContainerStates,
    LinkSample,
    NodeMemory,
    ProbeResult,
    ServiceGauges,
    WatchAlert,
    WatchSample,
    WatchStarted,
)
from spark_tui.ops.launch import launch
from spark_tui.ops.watch import watch
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.probe import probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.service.event_stream import streamed
from spark_tui.sim.nodes import SimCluster

CLEANUP = "spark-tui stop --inventory inv.yaml"


def pool_for(sim: SimCluster) -> ConnectionPool:
    return ConnectionPool(sim.inventory, ssh_config=None, backoff_initial=0.05)


async def ready_cluster(pool: ConnectionPool) -> LaunchPlan:
    facts = await probe_pool(pool)
    r = find_recipe("glm-5.3-flash")
    plan = build_plan(r, apply_overrides(r, []), facts)
    async for _ev in streamed(launch, plan, pool, follow=False, ready_timeout=60, local_env={}):
        pass
    return plan


async def kill(pool: ConnectionPool, node: str, name: str) -> None:
    docker = await RemoteDocker.open(pool[node])
    try:
        await docker.kill(name)
    finally:
        await docker.close()


async def test_watch_samples_then_reports_the_killed_worker(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim, pool_for(sim) as pool:
        plan = await ready_cluster(pool)
        worker = plan.ranks[1]
        events: list[WatchSample] = []
        killed = False

        async def run() -> None:
            nonlocal killed
            async for ev in streamed(watch, pool, interval=0.3, settle=1.0, cleanup=CLEANUP):
                events.append(ev)
                seen = {type(e) for e in events}
                wanted = {WatchStarted, ProbeResult, ServiceGauges, NodeMemory, ContainerStates}
                if (
                    not killed
                    and wanted <= seen
                    and sum(isinstance(e, ServiceGauges) for e in events) >= 2
                ):
                    killed = True
                    await kill(pool, worker.node, worker.container.name)

        await asyncio.wait_for(run(), 150)
        assert killed
        probes = [e for e in events if isinstance(e, ProbeResult)]
        assert probes[0].ok and probes[0].status == 200
        gauges = [e for e in events if isinstance(e, ServiceGauges)]
        assert gauges[0].running is not None and gauges[0].kv_cache_usage is not None
        assert any(g.generation_tokens_per_s is not None for g in gauges[1:])
        mem = [e for e in events if isinstance(e, NodeMemory)]
        assert {m.node for m in mem} == {r.node for r in plan.ranks}
        assert all(m.total and m.available and m.available <= m.total for m in mem)
        # The same sample reads each node's rank interface: the one the plan gave NCCL/Gloo.
        links = [e for e in events if isinstance(e, LinkSample)]
        assert {(e.node, r.interface) for e in links for r in e.interfaces} == {
            (r.node, r.container.env["NCCL_SOCKET_IFNAME"]) for r in plan.ranks
        }
        alert = events[-1]
        assert isinstance(alert, WatchAlert)
        assert alert.rank == 1 and alert.node == worker.node
        assert "killed" in alert.reason
        assert alert.lines  # a killed rank says little; its last lines are the evidence
        assert alert.head_lines, "the head's explaining lines come with the failed worker"
        assert alert.cleanup == f"{CLEANUP} --cluster {plan.cluster_id}"


async def test_hung_head_with_healthy_health_is_a_failure(sim_scenario) -> None:
    """A head that answers /health 200 but gives no token: the probe's timeout catches it."""
    async with SimCluster(sim_scenario(2)) as sim, pool_for(sim) as pool:
        await ready_cluster(pool)
        real = httpx.AsyncHTTPTransport()

        class Hung(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                if request.url.path == "/v1/chat/completions":
                    await asyncio.sleep(3600)
                return await real.handle_async_request(request)

        events: list[WatchSample] = []

        async def run() -> None:
            async for ev in streamed(
                watch, pool, interval=0.2, request_timeout=0.5, settle=0.2, transport=Hung()
            ):
                events.append(ev)

        await asyncio.wait_for(run(), 150)
        alert = events[-1]
        assert isinstance(alert, WatchAlert)
        assert alert.rank == 0
        assert "hung" in alert.reason and "/health answers 200" in alert.reason
        timeouts = [e for e in events if isinstance(e, ProbeResult) and e.timed_out]
        assert len(timeouts) >= 2
        await real.aclose()


async def test_status_says_failed_which_rank_why_and_the_stop_command(sim_scenario, capsys) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        inv = str(sim.inventory_path)
        async with pool_for(sim) as pool:
            plan = await ready_cluster(pool)
            worker = plan.ranks[1]
            await kill(pool, worker.node, worker.container.name)
        code = await asyncio.to_thread(cli.main, ["status", "--inventory", inv])
        out, _ = capsys.readouterr()
        assert code == 1
        assert f"cluster {plan.cluster_id}" in out and " failed " in out.splitlines()[0]
        assert f"failed: rank 1 on {worker.node} was killed" in out
        # The clean-up names the cluster (with clusters side by side a bare stop asks which).
        remove = f"spark-tui stop --inventory {inv} --cluster {plan.cluster_id}"
        assert f"clean up: {remove}\n" in out
        code = await asyncio.to_thread(cli.main, ["status", "--inventory", inv, "--json"])
        out, _ = capsys.readouterr()
        (cluster,) = json.loads(out)["clusters"]
        assert code == 1 and cluster["state"] == "failed"
        diag = cluster["diagnosis"]
        assert diag["failed_rank"] == 1 and "killed" in diag["failed"][0]["reason"]
        assert diag["failed"][0]["lines"]
        assert diag["cleanup"] == remove
        # A watch started on the dead cluster says the same at once (and, keeping the ranks
        # for inspection, the command that removes them).
        code = await asyncio.to_thread(cli.main, ["watch", "--inventory", inv, "--keep-failed"])
        _, err = capsys.readouterr()
        assert code == 1 and f"FAILED: rank 1 on {worker.node} was killed" in err
        assert f"clean up: {remove}\n" in err
        code = await asyncio.to_thread(cli.main, ["stop", "--inventory", inv])
        capsys.readouterr()
        code = await asyncio.to_thread(cli.main, ["status", "--inventory", inv])
        assert code == 0


async def watch_process(inv: str, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "spark_tui",
        "watch",
        "--inventory",
        inv,
        "--interval",
        "0.3",
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def read_until(stream: asyncio.StreamReader, text: str, seen: list[str]) -> None:
    while True:
        line = (await asyncio.wait_for(stream.readline(), 30)).decode()
        assert line, "".join(seen)
        seen.append(line)
        if text in line:
            return


async def test_cli_watch_exits_1_with_the_diagnosis_and_0_on_ctrl_c(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        inv = str(sim.inventory_path)
        async with pool_for(sim) as pool:
            plan = await ready_cluster(pool)
        worker = plan.ranks[1]
        # Ctrl+C: the watch ends, 0, the cluster keeps running.
        proc = await watch_process(inv)
        assert proc.stdout is not None and proc.stderr is not None
        seen: list[str] = []
        await read_until(proc.stdout, "probe ok", seen)
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert seen[0].startswith(f"watching cluster {plan.cluster_id}")
        # The worker dies while watched: the diagnosis on stderr, then exit 1.
        proc = await watch_process(inv, "--json")
        assert proc.stdout is not None and proc.stderr is not None
        seen = []
        await read_until(proc.stdout, '"event": "ContainerStates"', seen)
        async with pool_for(sim) as pool:
            await kill(pool, worker.node, worker.container.name)
        out = (await asyncio.wait_for(proc.stdout.read(), 60)).decode()
        code = await asyncio.wait_for(proc.wait(), 30)
        assert code == 1, "".join(seen) + out
        events = [json.loads(line) for line in out.splitlines()]
        kinds = [e["event"] for e in events]
        # The alert, the ranks' states as they are stopped, what was removed, and where
        # their lines are kept.
        alert, stopped, said = (events[kinds.index(k)] for k in ("WatchAlert", "Stopped", "Notice"))
        assert kinds.index("WatchAlert") < kinds.index("Stopped") < kinds.index("Notice")
        assert kinds[-1] == "Notice"
        assert alert["rank"] == 1
        assert alert["node"] == worker.node and "killed" in alert["reason"]
        # Every rank is stopped after the alert (so no clean-up command is needed).
        assert alert["cleanup"] is None
        assert stopped["event"] == "Stopped" and stopped["cluster_id"] == plan.cluster_id
        assert {name for _node, name in stopped["removed"]} == {
            r.container.name for r in plan.ranks
        }
        assert said["event"] == "Notice" and "stopped and removed" in said["message"]


async def test_cli_watch_exits_3_when_a_node_is_unreachable(tmp_path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("nodes:\n  - {name: gone, host: 127.0.0.254, port: 1}\n")
    code = await asyncio.to_thread(cli.main, ["watch", "--inventory", str(inv)])
    assert code == 3

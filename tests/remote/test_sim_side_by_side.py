"""Simulated Sparks beside a Textual cockpit (Python 3.12+ eager tasks) and beside each other
(two demos, or a demo and `spark-tui sim`, on one machine)."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from test_launch_sim import ENV, make_plan, pool_for

from spark_tui.core.inventory import parse_inventory
from spark_tui.ops.events import ClusterReady
from spark_tui.ops.launch import launch
from spark_tui.remote.probe import probe_nodes
from spark_tui.service.event_stream import streamed
from spark_tui.sim.nodes import Scenario, SimCluster
from spark_tui.sim.nodes.addresses import ENGINE_PORTS, free_base_address, listening_addresses

eager = getattr(asyncio, "eager_task_factory", None)


@pytest.mark.skipif(eager is None, reason="asyncio has eager tasks from Python 3.12 on")
async def test_nodes_on_their_own_loop_answer_a_client_on_an_eager_task_loop(
    sim_scenario,
) -> None:
    # What `App.run_async` does on 3.12+: the demo's SSH clients run on an eager loop.
    loop = asyncio.get_running_loop()
    before = loop.get_task_factory()
    loop.set_task_factory(eager)
    try:
        async with SimCluster(sim_scenario(2), own_loop=True) as sim:
            facts = await asyncio.wait_for(probe_nodes(sim.inventory, ssh_config=None), 60)
            assert [f.errors for f in facts] == [[], []]
            assert [f.address for f in facts] == [n.address for n in sim.nodes]
    finally:
        loop.set_task_factory(before)


def demo_scenario() -> Scenario:
    # What the demo asks for: the usual base address, any SSH port.
    return Scenario(nodes=2, ssh_port=0, pace=0.02, token_scale=0.05)


async def test_two_simulated_clusters_at_once_both_reach_ready() -> None:
    first = SimCluster(demo_scenario(), free_addresses=True, own_loop=True)
    second = SimCluster(demo_scenario(), free_addresses=True)
    await first.start()
    try:
        await second.start()
        try:
            ours = {n.address for n in first.nodes}
            theirs = {n.address for n in second.nodes}
            assert len(ours) == 2 and len(theirs) == 2 and not ours & theirs
            async with pool_for(first) as pool_a, pool_for(second) as pool_b:
                plans = [await make_plan(pool_a), await make_plan(pool_b)]
                assert {p.ranks[0].node for p in plans} == {"sim-spark-1"}

                async def ready(plan, pool) -> list[object]:
                    return [
                        ev
                        async for ev in streamed(
                            launch, plan, pool, follow=False, ready_timeout=90, local_env=ENV
                        )
                        if isinstance(ev, ClusterReady)
                    ]

                results = await asyncio.gather(ready(plans[0], pool_a), ready(plans[1], pool_b))
                assert [len(r) for r in results] == [1, 1]
                # Each head's engine serves on its own address, the recipe's port 8000.
                async with httpx.AsyncClient(timeout=10) as http:
                    for sim in (first, second):
                        r = await http.get(f"http://{sim.nodes[0].address}:8000/v1/models")
                        assert r.status_code == 200
        finally:
            await second.close()
    finally:
        await first.close()


def test_a_range_with_a_taken_engine_port_is_skipped(sim_scenario) -> None:
    base = sim_scenario(2).base_address
    host = base.rsplit(".", 1)[0] + "." + str(int(base.rsplit(".", 1)[1]) + 1)
    with socket.socket() as holder:
        holder.bind((host, ENGINE_PORTS[0]))
        holder.listen()
        chosen = free_base_address(2, 0, base)
    assert chosen != base


@pytest.mark.skipif(listening_addresses() is None, reason="the kernel lists no listeners here")
def test_an_address_with_any_listener_is_not_free(sim_scenario) -> None:
    base = sim_scenario(1).base_address
    assert free_base_address(1, 0, base) == base
    with socket.socket() as holder:
        holder.bind((base, 0))  # any port: another simulated node's SSH, say
        holder.listen()
        assert base in (listening_addresses() or set())
        assert free_base_address(1, 0, base) != base


def start_sim_command(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "spark_tui", "sim", "--pace", "0.05", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_spark_tui_sim_beside_a_demo_takes_other_addresses(tmp_path: Path) -> None:
    inventory = tmp_path / "sim.yaml"
    async with SimCluster(demo_scenario(), free_addresses=True, own_loop=True) as demo:
        proc = start_sim_command("--nodes", "2", "--inventory", str(inventory))
        try:
            deadline = time.monotonic() + 30
            while not inventory.exists() and proc.poll() is None:
                assert time.monotonic() < deadline, "no inventory from `spark-tui sim`"
                await asyncio.sleep(0.05)
            assert proc.poll() is None, proc.communicate()
            hosts = {n.host for n in parse_inventory(inventory.read_text())}
            assert len(hosts) == 2 and not hosts & {n.address for n in demo.nodes}
            facts = await probe_nodes(parse_inventory(inventory.read_text()), ssh_config=None)
            assert [f.errors for f in facts] == [[], []]
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_spark_tui_sim_refuses_a_base_address_an_engine_port_is_taken_on(
    tmp_path: Path, sim_scenario
) -> None:
    base = sim_scenario(1).base_address
    with socket.socket() as holder:
        holder.bind((base, ENGINE_PORTS[0]))  # another demo's engine, say
        holder.listen()
        proc = start_sim_command(
            "--nodes", "1", "--inventory", str(tmp_path / "inv.yaml"), "--base-address", base
        )
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    assert f"{base} already in use" in err and "leave out --base-address" in err
    assert "Traceback" not in err
    assert not (tmp_path / "inv.yaml").exists()

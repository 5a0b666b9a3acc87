"""Link and memory while a benchmark runs, on SIMULATED Sparks (real SSH, the stand-in
engine): every node sampled over its one open SSH connection, the rank interface's
counters rising with the engines' traffic, the figures in the result, the history and
`bench --json`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from spark_tui import cli
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.remote.link_sample import COMMAND_START
from spark_tui.service import events as ev
from spark_tui.service.bench import BenchConfig
from spark_tui.service.session import Session
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base
from spark_tui.sim.nodes.gb10 import primary_netdev

CONFIG = BenchConfig(concurrency=(4,), prompt_tokens=512, output_tokens=24, requests_per_level=16)


async def collect(events: Any) -> list[Any]:
    seen = []
    async for event in events:
        if isinstance(event, ev.Question):
            event.reply(True)
        seen.append(event)
    return seen


async def test_bench_samples_every_node_over_its_open_connection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(2), pace=0.02)
    async with SimCluster(scenario, state_dir=tmp_path / "sim") as sim:
        samples_answered = {n.name: 0 for n in sim.nodes}
        for node in sim.nodes:

            def counting(command: str, node: Any = node, answer: Any = node.answer) -> Any:
                if command.startswith(COMMAND_START):
                    samples_answered[node.name] += 1
                return answer(command)

            node.answer = counting  # type: ignore[method-assign]
        session = Session(sim.inventory, bench_config=CONFIG)
        try:
            await collect(session.launch(find_recipe("glm-5.3-flash"), {}, follow=False))
            connections = {n.name: set(n.connections) for n in sim.nodes}
            assert all(len(c) == 1 for c in connections.values()), connections
            seen = await collect(session.bench())
            # No new connection for the samples: each node's one connection carried them.
            assert {n.name: set(n.connections) for n in sim.nodes} == connections
        finally:
            await session.close()
        samples = [e for e in seen if isinstance(e, ev.LinkSample)]
        by_node = {n.name: [s for s in samples if s.node == n.name] for n in sim.nodes}
        for node in sim.nodes:
            mine = by_node[node.name]
            assert len(mine) >= 2, (node.name, len(mine))
            assert samples_answered[node.name] >= len(mine)
            # The rank's interface is the one the plan gave NCCL/Gloo: the cabled port.
            assert {r.interface for s in mine for r in s.interfaces} == {
                primary_netdev(node.scenario)
            }
            first, last = mine[0].interfaces[0], mine[-1].interfaces[0]
            assert last.rx_bytes > first.rx_bytes and last.tx_bytes > first.tx_bytes
            assert all(s.mem_available and s.mem_total for s in mine)
        done = next(e for e in seen if isinstance(e, ev.BenchDone))
        figures = {f.node: f for f in done.result.link}
        assert set(figures) == {n.name for n in sim.nodes}
        for f in figures.values():
            assert f.rx_peak_gbs and f.rx_peak_gbs > 0 and f.tx_mean_gbs and f.tx_mean_gbs > 0
            assert f.speed_gbs == 25.0 and f.peak_share and 0 < f.peak_share < 1
            # Far above the idle trickle: the engines' all-reduce traffic.
            assert f.rx_bytes > 10**6
        memory = {m.node: m for m in done.result.memory}
        assert set(memory) == set(figures)
        assert all(
            m.min_available and m.total and m.min_available < m.total for m in memory.values()
        )
        run = session.history.get_run(done.run_id or "")
        kept = run.results["bench"]
        assert [f["node"] for f in kept["link"]] == [f.node for f in done.result.link]
        assert kept["memory"][0]["min_available"] == done.result.memory[0].min_available

        # Headless, against the running cluster found on the nodes: the figures in --json.
        capsys.readouterr()
        code = await asyncio.to_thread(
            cli.main,
            [
                "bench",
                "--inventory",
                str(sim.inventory_path),
                "--concurrency",
                "2",
                "--prompt-tokens",
                "256",
                "--output-tokens",
                "16",
                "--requests-per-level",
                "8",
                "--json",
            ],
        )
        out = json.loads(capsys.readouterr().out)
        assert code == 0
        assert {f["node"] for f in out["link"]} == set(figures)
        assert all(f["rx_peak_gbs"] > 0 for f in out["link"])
        assert {m["node"] for m in out["memory"]} == set(figures)

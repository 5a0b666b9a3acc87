"""The headless commands (launch, status, logs, stop, probe) on simulated Sparks: output,
exit codes, and a SIGTERM during launch that stops what it started."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from spark_tui import cli
from spark_tui.ops.cluster import close_dockers, open_dockers
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.sim.nodes import SimCluster

SECRET = "hf_sim_secret_value_123"


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


def run_cli(*argv: str) -> int:
    return cli.main(list(argv))


async def test_cli_launch_status_logs_stop(sim_scenario, capsys) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        inv = str(sim.inventory_path)
        code = await asyncio.to_thread(
            run_cli,
            "launch",
            "glm-5.3-flash",
            "--inventory",
            inv,
            "--wait",
            "--ready-timeout",
            "60",
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "ready" in out and "fit: fits" in err
        code = await asyncio.to_thread(run_cli, "status", "--inventory", inv, "--json")
        out, _ = capsys.readouterr()
        (cluster,) = json.loads(out)["clusters"]
        # Launched with --wait: its API answers, so it is ready (not just "running").
        assert code == 0 and cluster["state"] == "ready" and len(cluster["ranks"]) == 2
        assert cluster["readiness"]["state"] == "ready" and cluster["progress"] is None
        code = await asyncio.to_thread(
            run_cli, "logs", "--inventory", inv, "--rank", "1", "--tail", "5"
        )
        out, _ = capsys.readouterr()
        lines = out.splitlines()
        assert code == 0 and len(lines) == 5
        assert all(line.startswith(f"[1 {sim.nodes[1].name}] ") for line in lines)
        code = await asyncio.to_thread(run_cli, "stop", "--inventory", inv)
        out, err = capsys.readouterr()
        assert code == 0 and out.count("removed ") == 2 and "no spark-tui container is left" in err
        async with pool_for(sim) as pool:
            assert await containers(pool) == []


async def test_cli_launch_refuses_what_does_not_fit(sim_scenario, capsys) -> None:
    async with SimCluster(sim_scenario(2, memory_gb=64)) as sim:
        code = await asyncio.to_thread(
            run_cli, "launch", "glm-5.3-flash", "--inventory", str(sim.inventory_path)
        )
        _, err = capsys.readouterr()
        assert code == 1
        assert "does not fit" in err and "--force" in err
        async with pool_for(sim) as pool:
            assert await containers(pool) == []


async def test_cli_launch_sigterm_stops_what_it_started(sim_scenario) -> None:
    # Slow enough that the API is not ready when the signal comes.
    async with SimCluster(sim_scenario(2, pace=1.0)) as sim:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "spark_tui",
            "launch",
            "glm-5.3-flash",
            "--inventory",
            str(sim.inventory_path),
            "--wait",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HF_TOKEN": SECRET},
        )
        assert proc.stderr is not None
        seen = []
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert line, "".join(seen)
            seen.append(line)
            if "started in" in line:
                break
        proc.send_signal(signal.SIGTERM)
        rest = (await asyncio.wait_for(proc.stderr.read(), 30)).decode()
        code = await proc.wait()
        assert code == 143, "".join(seen) + rest
        assert "interrupted" in rest and "Traceback" not in rest
        assert SECRET not in "".join(seen) + rest
        async with pool_for(sim) as pool:
            assert await containers(pool) == []

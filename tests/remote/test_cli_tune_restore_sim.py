"""Headless `tune` never leaves the user without their service by surprise, on simulated
Sparks (what `spark-tui sim` runs): a value the fit check refuses is refused with the
running cluster untouched, and a relaunch that fails at runtime (the head's API port is
taken, which no check before the launch can see) brings the settings it replaced back."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from spark_tui import cli
from spark_tui.sim.nodes import SimCluster

BENCH = [
    "--concurrency",
    "2",
    "--requests-per-level",
    "4",
    "--prompt-tokens",
    "16",
    "--output-tokens",
    "8",
]


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(data))
    return data


def status(inv: list[str], capsys: pytest.CaptureFixture[str]) -> list[dict]:  # type: ignore[type-arg]
    capsys.readouterr()
    assert cli.main(["status", *inv, "--json"]) == 0
    return list(json.loads(capsys.readouterr().out)["clusters"])


async def test_a_refused_value_leaves_it_running_and_a_failed_one_brings_it_back(
    sim_scenario, capsys
) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        inv = ["--inventory", str(sim.inventory_path)]
        code = await asyncio.to_thread(
            cli.main, ["launch", "glm-5.3-flash", *inv, "--wait", "--ready-timeout", "60"]
        )
        assert code == 0, capsys.readouterr().err
        (before,) = await asyncio.to_thread(status, inv, capsys)
        assert before["state"] == "ready"

        # 0.05 of a GB10 leaves no room for the weights: the fit check says no, and no
        # terminal confirms launching anyway.
        argv = ["tune", "glm-5.3-flash", *inv, "--set", "gpu_memory_utilization=0.05", *BENCH]
        code = await asyncio.to_thread(cli.main, argv)
        err = capsys.readouterr().err
        assert code == 1, err
        assert "does not fit" in err and f"{before['cluster_id']} is still running" in err, err
        # Refused before the baseline was measured: minutes of benchmark for nothing.
        assert "measuring the baseline" not in err and "level 1/" not in err, err
        (still,) = await asyncio.to_thread(status, inv, capsys)
        assert still["cluster_id"] == before["cluster_id"] and still["state"] == "ready"
        assert still["settings_hash"] == before["settings_hash"]
        assert [r["container"] for r in still["ranks"]] == [r["container"] for r in before["ranks"]]
        assert all(r["state"] == "running" for r in still["ranks"]), still
        assert cli.main(["history", "--json"]) == 0
        launches = [r for r in json.loads(capsys.readouterr().out) if r["kind"] == "launch"]
        assert len(launches) == 1, "the refused value never started"

        # The head's API port taken by another program: vLLM fails at startup.
        head = sim.nodes[0].address
        with socket.socket() as taken:
            taken.bind((head, 0))
            taken.listen()
            port = taken.getsockname()[1]
            argv = ["tune", "glm-5.3-flash", *inv, "--set", f"port={port}", *BENCH]
            code = await asyncio.to_thread(cli.main, argv)
        err = capsys.readouterr().err
        assert code == 1, err
        assert "Address already in use" in err, err
        assert f"runs the settings it ran with before port={port} again" in err, err
        remedy = err.splitlines()[-1]
        assert "the settings it ran with before run again" in remedy, remedy
        (back,) = await asyncio.to_thread(status, inv, capsys)
        assert back["cluster_id"] == before["cluster_id"] and back["state"] == "ready", back
        assert all(r["state"] == "running" for r in back["ranks"]), back
        assert back["settings_hash"] == before["settings_hash"], "the settings before the change"
        head_argv = back["ranks"][0]["command"]
        assert head_argv[head_argv.index("--port") + 1] == "8000", head_argv
        assert cli.main(["history", "--json"]) == 0
        launches = [r for r in json.loads(capsys.readouterr().out) if r["kind"] == "launch"]
        assert len(launches) == 3, launches  # the first, the one that failed, the one back
        assert await asyncio.to_thread(cli.main, ["stop", *inv]) == 0

"""Four lab nodes on REAL vLLM (0.32, CPU build), `spark-tui lab up --nodes 4 --engine vllm`:
DP 4 (a replica per node, one API on the head, the others headless) launches through the
CLI, reaches ready, and every replica's engine serves requests, as the head's /metrics
counts them, then stops with nothing left. Hybrid TP 2 x DP 2 of the lab's dense model hangs
in vLLM 0.32 (each replica's engine runs alone as DP 1, with a world of 2, while the
replica's other node waits for a world of 4 at the same rendezvous: seen here, the head's
workers `world_size=2 rank=0`, the second node's `world_size=4 rank=1`, nothing after), so
`check` refuses it before any container starts.

One real-vLLM lab of four nodes serves the module (select it with `-m vllm`, under the lab
lock); one real launch.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from labkit import (
    all_containers,
    cli,
    lab_guard,
    running_lab,
    sweep_stale_test_labs,
    unique_config,
)

from spark_tui.sim.lab import Lab

lab_guard()

pytestmark = [pytest.mark.lab, pytest.mark.vllm, pytest.mark.usefixtures("shared_flag_cache")]

READY_TIMEOUT = 1500  # seconds: four real vLLM ranks on a busy 2-core machine


@pytest.fixture(scope="module")
def lab4() -> Iterator[Lab]:
    """Four real-vLLM lab nodes for this module; down (and checked clean) at its end."""
    sweep_stale_test_labs()
    cfg = unique_config(4, memory_gb=128, engine="vllm")
    with running_lab(cfg) as the_lab:
        yield the_lab


@pytest.fixture(scope="module")
def files(lab4: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("vllm-four")
    inventory = d / "lab.yaml"
    lab4.write_inventory(inventory)
    recipe = lab4.write_recipe(d)
    assert recipe is not None
    return {"inventory": inventory, "recipe": recipe}


def _keep(name: str, text: str) -> None:
    """The real output, kept beside the test run for whoever reads the result."""
    out = Path("/tmp/spark-tui-four-real")
    out.mkdir(exist_ok=True)
    (out / name).write_text(text)


def _served(base: str, requests: int) -> dict[str, float]:
    """`requests` chats at once to the head's API; the successes per engine in /metrics."""

    async def many() -> list[int]:
        async with httpx.AsyncClient(base_url=base, timeout=900) as http:
            body = {
                "model": "tiny-qwen2",
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 8,
            }
            got = await asyncio.gather(
                *(http.post("/v1/chat/completions", json=body) for _ in range(requests))
            )
            return [r.status_code for r in got]

    assert asyncio.run(many()) == [200] * requests
    metrics = httpx.get(base + "/metrics", timeout=60).text
    served: dict[str, float] = {}
    for m in re.finditer(r"^vllm:request_success_total\{([^}]*)\} ([0-9.e+]+)$", metrics, re.M):
        engine = re.search(r'engine="(\d+)"', m.group(1))
        if engine:
            served[engine.group(1)] = served.get(engine.group(1), 0.0) + float(m.group(2))
    return served


def test_check_refuses_the_dense_hybrid_layout_vllm_hangs_on(files: dict[str, Path]) -> None:
    sets = ["--set", "tensor_parallel=2", "--set", "data_parallel=2"]
    res = cli(
        "check", str(files["recipe"]), "--inventory", str(files["inventory"]), *sets, "--json"
    )
    assert res.returncode == 1, res.stdout + res.stderr
    found = json.loads(res.stdout)["findings"]
    (said,) = [f for f in found if f["code"] == "dense_replicas_across_nodes"]
    assert said["severity"] == "error" and "hang" in said["message"], said
    assert "--set data_parallel=4" in said["remedy"], said


def test_dp4_serves_from_every_replica(lab4: Lab, files: dict[str, Path]) -> None:
    name, dp = "dp4", 4
    sets = ["--set", "tensor_parallel=1", "--set", f"data_parallel={dp}"]
    where = ["--inventory", str(files["inventory"])]
    plan = cli("plan", str(files["recipe"]), *where, *sets, "--json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    ranks = json.loads(plan.stdout)["ranks"]
    assert [r["serves_api"] for r in ranks] == [True, False, False, False]
    res = cli(
        "launch",
        str(files["recipe"]),
        *where,
        *sets,
        "--wait",
        "--replace",
        "--ready-timeout",
        str(READY_TIMEOUT),
        timeout=READY_TIMEOUT + 180,
    )
    try:
        said = res.stdout + res.stderr
        _keep(f"{name}-launch.txt", said)
        assert res.returncode == 0, said[-4000:]
        for rank in range(4):
            assert f"rank {rank} spark-lab-{rank + 1}: ready" in said, said[-4000:]
        served = _served(f"http://{lab4.node(1).address}:8000", 8 * dp)
        _keep(f"{name}-served.json", json.dumps(served))
        # Every replica's engine finished some (the head's API balanced them over all).
        assert sorted(served) == [str(i) for i in range(dp)], served
        assert all(n > 0 for n in served.values()), served
        for rank in range(4):
            log = cli("logs", *where, "--rank", str(rank), "--tail", "20000", timeout=300)
            _keep(f"{name}-rank{rank}.log", log.stdout)
            assert "Traceback" not in log.stdout, log.stdout[-4000:]
    finally:
        stop = cli("stop", *where, timeout=300)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert not any(all_containers(lab4).values()), all_containers(lab4)

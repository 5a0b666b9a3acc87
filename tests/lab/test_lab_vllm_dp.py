"""Data parallelism on REAL vLLM (0.32, CPU build) across two lab nodes: the launch plan's
form (one API server on the head, the other node `--headless --data-parallel-start-rank 1`)
runs the lab's dense model as two replicas, and requests are served by both, as each
replica's engine says; the per-node form (`--data-parallel-rank` on every node) is refused
in the words `check` predicts.

One real-vLLM lab serves the module (its own: select it with `-m vllm`, under the lab lock).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from labkit import cli, lab_guard, launched, real_vllm_to_end

from spark_tui.sim.lab import Lab, vllm_image

lab_guard()

pytestmark = [pytest.mark.lab, pytest.mark.vllm]

READY_TIMEOUT = 900  # seconds: two real vLLM ranks on a busy 2-core machine
DP2 = ["--set", "tensor_parallel=1", "--set", "data_parallel=2"]
# vLLM 0.32's refusal of the per-node form for a dense model (vllm/engine/arg_utils.py).
EXTERNAL_LB_REFUSAL = (
    "Non-MoE models do not support external data parallel mode. For external load "
    "balancing, launch independent vLLM instances without --data-parallel-* arguments."
)


@pytest.fixture(scope="module")
def files(vllm_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The inventory and, next to it, the recipe `lab up --engine vllm` writes."""
    d = tmp_path_factory.mktemp("vllm-dp")
    inventory = d / "lab.yaml"
    vllm_lab.write_inventory(inventory)
    recipe = vllm_lab.write_recipe(d)
    assert recipe is not None
    return {"dir": d, "inventory": inventory, "recipe": recipe}


@pytest.fixture(scope="module")
def cluster(vllm_lab: Lab, files: dict[str, Path]) -> Iterator[dict[str, Any]]:
    """`launch --set tensor_parallel=1 --set data_parallel=2 --wait`, stopped at the end."""
    with launched(
        files["recipe"], files["inventory"], *DP2, ready_timeout=READY_TIMEOUT, stop_timeout=120
    ) as res:
        yield {"launch": res}


def _log(files: dict[str, Path], rank: int) -> str:
    res = cli(
        "logs", "--inventory", str(files["inventory"]), "--rank", str(rank), "--tail", "20000"
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def _keep(name: str, text: str) -> None:
    """The real logs, kept beside the test run for whoever reads the result."""
    out = Path("/tmp/spark-tui-dp-real")
    out.mkdir(exist_ok=True)
    (out / name).write_text(text)


def _generated(log: str, engine: int) -> list[float]:
    """The generation throughputs of one engine's periodic stats lines in the head's log."""
    pattern = rf"Engine {engine:03d}: Avg prompt throughput: [0-9.]+ tokens/s, Avg generation throughput: ([0-9.]+)"
    return [float(m.group(1)) for m in re.finditer(pattern, log)]


def _real_refusal(lab: Lab) -> tuple[int, str]:
    """Real vLLM on node 1 given the per-node form (its own API, --data-parallel-rank 0)."""
    args = [
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "2048",
        "--data-parallel-size",
        "2",
        "--data-parallel-rank",
        "0",
        "--data-parallel-address",
        lab.node(1).address,
        "--data-parallel-rpc-port",
        "13345",
    ]
    return real_vllm_to_end(
        lab,
        ["vllm", "serve", vllm_image.MODEL_REPO, *args],
        {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"},
    )


def test_check_predicts_vllms_refusal_of_the_per_node_form(
    vllm_lab: Lab, files: dict[str, Path]
) -> None:
    code, out = _real_refusal(vllm_lab)
    _keep("external-lb-refusal.txt", out)
    lines = [ln for ln in out.splitlines() if "Non-MoE models do not support" in ln]
    assert code == 1 and lines, out[-3000:]
    assert EXTERNAL_LB_REFUSAL in lines[-1]
    # A recipe asking for external load balancing: check says it in the same words.
    text = files["recipe"].read_text().rstrip("\n") + " \\\n    --data-parallel-external-lb\n"
    recipe = files["dir"] / "external-lb.yaml"
    recipe.write_text(text)
    res = cli("check", str(recipe), "--inventory", str(files["inventory"]), *DP2, "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    (said,) = [
        f for f in json.loads(res.stdout)["findings"] if f["code"] == "external_data_parallel"
    ]
    assert lines[-1].split("ValueError: ", 1)[-1] in said["message"], (said, lines[-1])
    assert said["severity"] == "error" and "drop --data-parallel-external-lb" in said["remedy"]


def test_the_plan_is_one_api_on_the_head_and_a_headless_replica(files: dict[str, Path]) -> None:
    res = cli("plan", str(files["recipe"]), "--inventory", str(files["inventory"]), *DP2, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    ranks = json.loads(res.stdout)["ranks"]
    head, other = ranks[0]["argv"], ranks[1]["argv"]
    assert "--headless" not in head and "--data-parallel-start-rank" not in head
    assert head[head.index("--api-server-count") + 1] == "1"
    assert other[other.index("--data-parallel-start-rank") + 1] == "1" and "--headless" in other
    for argv in (head, other):
        assert argv[argv.index("--data-parallel-size") + 1] == "2"
        assert argv[argv.index("--data-parallel-size-local") + 1] == "1"
        assert "--data-parallel-rank" not in argv and "--nnodes" not in argv
    assert [r["serves_api"] for r in ranks] == [True, False]


def test_dp2_reaches_ready_and_both_replicas_serve(
    cluster: dict[str, Any], files: dict[str, Path], vllm_lab: Lab
) -> None:
    res = cluster["launch"]
    said = res.stdout + res.stderr
    _keep("launch.txt", said)
    assert res.returncode == 0, said[-4000:]
    assert "rank 0 spark-lab-1: ready" in said and "rank 1 spark-lab-2: ready" in said, said
    head_ip = vllm_lab.node(1).address
    base = f"http://{head_ip}:8000"

    async def many() -> list[int]:
        async with httpx.AsyncClient(base_url=base, timeout=600) as http:
            body = {
                "model": "tiny-qwen2",
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 16,
            }
            got = await asyncio.gather(
                *(http.post("/v1/chat/completions", json=body) for _ in range(16))
            )
            return [r.status_code for r in got]

    assert asyncio.run(many()) == [200] * 16
    metrics = httpx.get(base + "/metrics", timeout=60).text
    _keep("metrics.txt", metrics)
    served: dict[str, float] = {}
    for m in re.finditer(r"^vllm:request_success_total\{([^}]*)\} ([0-9.e+]+)$", metrics, re.M):
        engine = re.search(r'engine="(\d+)"', m.group(1))
        if engine:
            served[engine.group(1)] = served.get(engine.group(1), 0.0) + float(m.group(2))
    # Each replica's engine finished some of the 16 (the head's API balanced them).
    assert served.get("0", 0) > 0 and served.get("1", 0) > 0, served
    assert served["0"] + served["1"] >= 16, served

    # The head's log carries each engine's own stats lines (vLLM logs them every 10 s while
    # an engine is busy, and once more after): engine 001 is the headless node's replica.
    deadline = time.monotonic() + 120
    while True:
        head_log = _log(files, 0)
        busy = {e: [g for g in _generated(head_log, e) if g > 0] for e in (0, 1)}
        if (busy[0] and busy[1]) or time.monotonic() > deadline:
            break
        time.sleep(5)
    worker_log = _log(files, 1)
    _keep("rank0.log", head_log)
    _keep("rank1.log", worker_log)
    assert busy[0] and busy[1], head_log[-6000:]
    # The other node runs the second replica's engine, headless, joined to the head's.
    assert (
        "Launching 1 data parallel engine(s) in headless mode, with head node address "
        f"tcp://{head_ip}:13345." in worker_log
    ), worker_log[-4000:]
    assert "EngineCore_DP1" in worker_log, worker_log[-4000:]
    assert "Traceback" not in head_log and "Traceback" not in worker_log

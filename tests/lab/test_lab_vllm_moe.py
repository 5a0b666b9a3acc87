"""Data parallelism of a mixture-of-experts model on REAL vLLM (0.32, CPU build) across two
lab nodes, with the lab's tiny Qwen3-MoE (4 experts, 2 a token).

What real vLLM does, pinned here: in the launch plan's form (one API server on the head, the
other node `--headless --data-parallel-start-rank 1`) the two replicas' engines meet across
the nodes as one data-parallel group (DP rank 1 / EP rank 1 on the second node) and answer
/health, and the per-node form (`--data-parallel-rank` on every node, an API each), which
vLLM allows for a MoE model only, starts too; but in both the first request stops every
engine: the CPU build's communicator has no `all_gatherv`, which the MoE layers' exchange
between data-parallel ranks calls (NotImplementedError). `check` says so before a launch, with
the remedy (one replica over the nodes: TP 2), which serves. A recipe asking for external load
balancing is refused in the words `check` predicts for a MoE model.

One real-vLLM lab serves the module (its own: select it with `-m vllm`, under the lab lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from labkit import cli, docker_client, lab_guard, launched, real_vllm_to_end

from spark_tui.core import serve_rules
from spark_tui.sim.lab import Lab, vllm_image

lab_guard()

pytestmark = [pytest.mark.lab, pytest.mark.vllm]

READY_TIMEOUT = 900  # seconds: two real vLLM ranks on a busy 2-core machine
PER_NODE_WAIT = 600  # seconds the per-node form is given to answer on both nodes
DP2 = ["--set", "tensor_parallel=1", "--set", "data_parallel=2"]
SERVED = "tiny-qwen3-moe"
KEEP = Path("/tmp/spark-tui-moe-real")


@pytest.fixture(scope="module")
def files(vllm_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The inventory and the MoE model's recipe (the lab puts the model in every node)."""
    d = tmp_path_factory.mktemp("vllm-moe")
    inventory = d / "lab.yaml"
    vllm_lab.write_inventory(inventory)
    recipe = vllm_image.write_recipe(d, 2, moe=True)
    return {"dir": d, "inventory": inventory, "recipe": recipe}


# What every MoE engine of the CPU build says at its first request under DP 2.
CRASH = [
    'base_device_communicator.py", line 296, in all_gatherv',
    "NotImplementedError",
    "RuntimeError: Worker failed with error '', please check the stack trace above for the "
    "root cause",
]


def _keep(name: str, text: str) -> None:
    """The real logs, kept beside the test run for whoever reads the result."""
    KEEP.mkdir(exist_ok=True)
    (KEEP / name).write_text(text)


def _log(files: dict[str, Path], rank: int) -> str:
    res = cli(
        "logs", "--inventory", str(files["inventory"]), "--rank", str(rank), "--tail", "20000"
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def _plan(files: dict[str, Path]) -> list[dict[str, Any]]:
    res = cli("plan", str(files["recipe"]), "--inventory", str(files["inventory"]), *DP2, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    ranks: list[dict[str, Any]] = json.loads(res.stdout)["ranks"]
    return ranks


def _ask(base: str, n: int) -> list[int]:
    async def many() -> list[int]:
        async with httpx.AsyncClient(base_url=base, timeout=600) as http:
            body = {
                "model": SERVED,
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 16,
            }
            got = await asyncio.gather(
                *(http.post("/v1/chat/completions", json=body) for _ in range(n))
            )
            return [r.status_code for r in got]

    return asyncio.run(many())


def _healthy(address: str) -> bool:
    try:
        return httpx.get(f"http://{address}:8000/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _per_node_argv(argv: list[str], replica: int) -> list[str]:
    """The plan's argv of a rank turned into the per-node (external load balancing) form:
    its own API server and `--data-parallel-rank`, no --headless or start rank."""
    out: list[str] = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in ("--data-parallel-start-rank", "--api-server-count"):
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            continue
        if a == "--headless":
            continue
        out.append(a)
    return [*out, "--data-parallel-rank", str(replica)]


def _run_per_node_form(lab: Lab, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Start the per-node form on both nodes at once, wait until both answer /health (or a
    rank exits, or PER_NODE_WAIT passes), ask each API, then kill both (a rank stuck in its
    process group's setup ignores SIGTERM)."""
    clients = [docker_client(lab, i + 1, timeout=600) for i in range(len(ranks))]
    started: list[Any] = []
    result: dict[str, Any] = {"argv": [], "healthy": [], "exit": [], "served": {}, "logs": []}
    try:
        for i, (client, rank) in enumerate(zip(clients, ranks, strict=True)):
            argv = _per_node_argv(rank["argv"], i)
            result["argv"].append(argv)
            started.append(
                client.containers.run(
                    vllm_image.VLLM_IMAGE,
                    argv,
                    name=f"moe-per-node-{i}",
                    environment=rank["env"],
                    volumes={
                        f"{lab.node(i + 1).home}/.cache/huggingface": {
                            "bind": "/root/.cache/huggingface",
                            "mode": "ro",
                        }
                    },
                    network_mode="host",
                    ipc_mode="host",
                    detach=True,
                )
            )
        addresses = [lab.node(i + 1).address for i in range(len(ranks))]
        deadline = time.monotonic() + PER_NODE_WAIT
        healthy = [False] * len(ranks)
        while time.monotonic() < deadline:
            healthy = [_healthy(a) for a in addresses]
            for c in started:
                c.reload()
            if all(healthy) or any(c.status == "exited" for c in started):
                break
            time.sleep(5)
        result["healthy"] = healthy
        result["waited"] = round(PER_NODE_WAIT - (deadline - time.monotonic()))
        if all(healthy):
            for a in addresses:
                result["served"][a] = _ask(f"http://{a}:8000", 4)
            time.sleep(12)  # the engines' stats lines come every 10 s
        for c in started:
            c.reload()
            result["exit"].append(c.attrs["State"]["ExitCode"] if c.status == "exited" else None)
            result["logs"].append(c.logs().decode("utf-8", "replace"))
        return result
    finally:
        for c in started:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                c.remove(force=True)
        for client in clients:
            client.close()


def test_the_per_node_form_of_a_moe_model(vllm_lab: Lab, files: dict[str, Path]) -> None:
    got = _run_per_node_form(vllm_lab, _plan(files))
    for i, log in enumerate(got["logs"]):
        _keep(f"per-node-rank{i}.log", log)
    _keep("per-node.json", json.dumps({k: v for k, v in got.items() if k != "logs"}, indent=2))
    # Both ranks start, each with its own API, and answer /health ...
    assert got["healthy"] == [True, True], got
    # ... then the first requests stop both engines.
    assert [set(codes) for codes in got["served"].values()] == [{500}, {500}], got["served"]
    for log in got["logs"]:
        for words in CRASH:
            assert words in log, log[-4000:]
        assert "EngineDeadError: EngineCore encountered an issue." in log, log[-4000:]
    # The two engines had formed one data-parallel group across the nodes first.
    assert "is assigned as DP rank 1" in got["logs"][1], got["logs"][1][-4000:]


def _real_exit(lab: Lab, rank: dict[str, Any], argv: list[str]) -> tuple[int, str]:
    """Real vLLM on node 1 run with `argv` (to its end); (exit code, output)."""
    return real_vllm_to_end(lab, argv, rank["env"])


def test_check_predicts_vllms_refusal_of_external_lb_for_moe(
    vllm_lab: Lab, files: dict[str, Path]
) -> None:
    """The plan's head with `--data-parallel-external-lb` added (a recipe asking for it):
    for a MoE model vLLM does not say "Non-MoE ..." but wants a rank of its own."""
    head = _plan(files)[0]
    code, out = _real_exit(vllm_lab, head, [*head["argv"], "--data-parallel-external-lb"])
    _keep("external-lb-refusal.txt", out)
    lines = [ln for ln in out.splitlines() if "ValueError: " in ln]
    assert code == 1 and lines, out[-3000:]
    assert "Non-MoE" not in out
    words = lines[-1].split("ValueError: ", 1)[-1]
    assert words in serve_rules.EXTERNAL_DP_WITHOUT_RANK, words
    text = files["recipe"].read_text().rstrip("\n") + " \\\n    --data-parallel-external-lb\n"
    recipe = files["dir"] / "external-lb.yaml"
    recipe.write_text(text)
    res = cli("check", str(recipe), "--inventory", str(files["inventory"]), *DP2, "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    (said,) = [
        f for f in json.loads(res.stdout)["findings"] if f["code"] == "external_data_parallel"
    ]
    assert words in said["message"] and "Non-MoE" not in said["message"], said


def test_the_plan_is_one_api_on_the_head_and_a_headless_replica(files: dict[str, Path]) -> None:
    ranks = _plan(files)
    head, other = ranks[0]["argv"], ranks[1]["argv"]
    assert "--headless" not in head and "--data-parallel-start-rank" not in head
    assert other[other.index("--data-parallel-start-rank") + 1] == "1" and "--headless" in other
    for argv in (head, other):
        assert argv[argv.index("--data-parallel-size") + 1] == "2"
        assert argv[argv.index("--data-parallel-size-local") + 1] == "1"
        assert "--data-parallel-rank" not in argv
    assert [r["serves_api"] for r in ranks] == [True, False]


def test_check_says_the_cpu_build_stops_a_moe_models_replicas(files: dict[str, Path]) -> None:
    # check knows the model is MoE (its config, read from the nodes' caches) and the CPU
    # build (the recipe's VLLM_CPU_KVCACHE_SPACE), and says what real vLLM does above.
    res = cli("check", str(files["recipe"]), "--inventory", str(files["inventory"]), *DP2, "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    errors = [f for f in json.loads(res.stdout)["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in errors] == ["cpu_moe_data_parallel"], errors
    assert "NotImplementedError" in errors[0]["message"] and CRASH[2] in errors[0]["message"]
    assert "--set data_parallel=1 --set tensor_parallel=2" in errors[0]["remedy"]
    # Its remedy passes check.
    tp2 = ["--set", "tensor_parallel=2", "--set", "data_parallel=1"]
    res = cli("check", str(files["recipe"]), "--inventory", str(files["inventory"]), *tp2)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_plans_form_forms_the_group_then_stops_at_the_first_request(
    vllm_lab: Lab, files: dict[str, Path]
) -> None:
    """`launch --force` past check's refusal: what real vLLM does with the plan's form (the
    ranks kept after the failure, for their whole logs)."""
    with launched(
        files["recipe"],
        files["inventory"],
        *DP2,
        "--force",
        "--keep-failed",
        ready_timeout=READY_TIMEOUT,
        stop_timeout=120,
    ) as res:
        said = res.stdout + res.stderr
        _keep("launch-dp2.txt", said)
        worker_log = _log(files, 1)
        _keep("dp2-rank1.log", worker_log)
    head_ip = vllm_lab.node(1).address
    # The replicas met: the second node's engine joined the head's as DP rank 1 ...
    assert (
        "Launching 1 data parallel engine(s) in headless mode, with head node address "
        f"tcp://{head_ip}:13345." in worker_log
    ), worker_log[-4000:]
    assert "rank 1 in world size 2 is assigned as DP rank 1" in worker_log, worker_log[-4000:]
    assert "Using CPUUnquantizedExperts MoE backend" in worker_log, worker_log[-4000:]
    # ... and the launch's first request stopped them, in the words check quotes.
    assert res.returncode == 1, said[-4000:]
    for words in CRASH:
        assert words in said, said[-4000:]
    # The failure's remedy names the layout that serves (not "read the lines above").
    remedy = said[said.rindex("remedy:") :]
    assert "all_gatherv" in remedy, remedy
    assert "--set data_parallel=1 --set tensor_parallel=2" in remedy, remedy


def test_the_remedy_one_replica_over_the_nodes_serves(
    vllm_lab: Lab, files: dict[str, Path]
) -> None:
    tp2 = ["--set", "tensor_parallel=2", "--set", "data_parallel=1"]
    with launched(
        files["recipe"], files["inventory"], *tp2, ready_timeout=READY_TIMEOUT, stop_timeout=120
    ) as res:
        said = res.stdout + res.stderr
        _keep("launch-tp2.txt", said)
        assert res.returncode == 0, said[-4000:]
        assert "rank 0 spark-lab-1: ready" in said and "rank 1 spark-lab-2: ready" in said
        assert _ask(f"http://{vllm_lab.node(1).address}:8000", 8) == [200] * 8
        worker_log = _log(files, 1)
        _keep("tp2-rank1.log", worker_log)
    assert "Using CPUUnquantizedExperts MoE backend" in worker_log, worker_log[-4000:]
    assert "Traceback" not in said and "Traceback" not in worker_log

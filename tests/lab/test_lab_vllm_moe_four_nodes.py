"""Hybrid TP 2 x DP 2 of the lab's tiny Qwen3-MoE on REAL vLLM (0.32, CPU build) over four
lab nodes, in the launch plan's form (`--nnodes 4 --node-rank N` and the head's
`--master-addr` on every node, the head's API balancing both replicas, the others headless):
the four workers form one world of 4 ranks at the head (a MoE model's replicas are one
world; a rendezvous per replica leader hung), and the first request then stops them as the
CPU build stops every MoE model's replicas (`check` refuses that before a launch).

One real-vLLM lab of four nodes serves the module (select it with `-m vllm`, under the lab
lock); one real launch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from labkit import cli, lab_guard, running_lab, sweep_stale_test_labs, unique_config
from test_lab_vllm_moe import CRASH

from spark_tui.sim.lab import Lab, vllm_image

lab_guard()

pytestmark = [pytest.mark.lab, pytest.mark.vllm, pytest.mark.usefixtures("shared_flag_cache")]

READY_TIMEOUT = 900  # seconds: four real vLLM ranks on a busy 2-core machine
HYBRID = ["--set", "tensor_parallel=2", "--set", "data_parallel=2"]
KEEP = Path("/tmp/spark-tui-moe-four-real")


@pytest.fixture(scope="module")
def lab4() -> Iterator[Lab]:
    """Four real-vLLM lab nodes for this module; down (and checked clean) at its end."""
    sweep_stale_test_labs()
    cfg = unique_config(4, memory_gb=128, engine="vllm")
    with running_lab(cfg) as the_lab:
        yield the_lab


@pytest.fixture(scope="module")
def files(lab4: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("vllm-moe-four")
    inventory = d / "lab.yaml"
    lab4.write_inventory(inventory)
    return {"inventory": inventory, "recipe": vllm_image.write_recipe(d, 4, moe=True)}


def _keep(name: str, text: str) -> None:
    KEEP.mkdir(exist_ok=True)
    (KEEP / name).write_text(text)


def test_hybrid_tp2_dp2_of_a_moe_model_forms_one_world_at_the_head(
    lab4: Lab, files: dict[str, Path]
) -> None:
    where = ["--inventory", str(files["inventory"])]
    check = cli("check", str(files["recipe"]), *where, *HYBRID, "--json")
    codes = [f["code"] for f in json.loads(check.stdout)["findings"] if f["severity"] == "error"]
    # A MoE model is not refused as a dense one (its replicas form one world), only for
    # the CPU build's first request.
    assert codes == ["cpu_moe_data_parallel"], check.stdout
    res = cli(
        "launch",
        str(files["recipe"]),
        *where,
        *HYBRID,
        "--force",
        "--keep-failed",
        "--wait",
        "--replace",
        "--ready-timeout",
        str(READY_TIMEOUT),
        timeout=READY_TIMEOUT + 180,
    )
    try:
        said = res.stdout + res.stderr
        _keep("launch.txt", said)
        logs = []
        for rank in range(4):
            log = cli("logs", *where, "--rank", str(rank), "--tail", "20000", timeout=300)
            _keep(f"rank{rank}.log", log.stdout + log.stderr)
            logs.append(log.stdout)
    finally:
        cli("stop", *where, timeout=300)
    head_ip = lab4.node(1).address
    for rank, text in enumerate(logs):
        world = f"world_size=4 rank={rank} local_rank=0 distributed_init_method=tcp://{head_ip}:"
        assert world in text, text[-4000:]
    assert "rank 2 in world size 4 is assigned as DP rank 1" in logs[2], logs[2][-4000:]
    # Formed, then the launch's first request stopped the replicas (the CPU build).
    assert res.returncode == 1, said[-4000:]
    for words in CRASH:
        assert words in said, said[-4000:]
    remedy = said[said.rindex("remedy:") :]
    assert "--set data_parallel=1 --set tensor_parallel=4" in remedy, remedy

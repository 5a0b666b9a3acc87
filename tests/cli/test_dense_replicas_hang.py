"""A dense model's data-parallel replicas that span nodes (TP 2 x DP 2 on four simulated
Sparks) never form, as on real vLLM 0.32: `check` refuses the layout, and a launch forced
past it ends at its ready timeout saying which ranks logged which world size and giving
check's remedy, not the rendezvous (firewall) advice."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.serve_rules import dense_replicas_remedy
from tests.cli.conftest import Cli, SimProcess, running_sim

HYBRID = ("--set", "tensor_parallel=2", "--set", "data_parallel=2")
TOKEN = {"HF_TOKEN": "hf_sim_dense_replicas_token"}


def _said(res: subprocess.CompletedProcess[str]) -> str:
    return f"exit {res.returncode}\n--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr}"


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The bundled dense recipe (Llama 3.3 70B, gated), made for up to four nodes and pinned
    to an image the simulated nodes hold."""
    source = find_recipe("llama-3.3-70b-instruct-tp2").path
    assert source is not None
    text = Path(source).read_text()
    text = text.replace("max_nodes: 2", "max_nodes: 4").replace(
        "ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest", "nvcr.io/nvidia/vllm:26.05.post1-py3"
    )
    path = tmp_path_factory.mktemp("recipe") / "llama-dense-replicas.yaml"
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def four(cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sim(cli, tmp_path_factory.mktemp("sim4"), nodes=4) as sim:
        yield sim


def test_check_refuses_the_layout(cli: Cli, four: SimProcess, recipe: str) -> None:
    inv = str(four.inventory)
    res = cli.run("check", recipe, "--inventory", inv, *HYBRID, "--json", env=TOKEN, timeout=120)
    assert res.returncode == 1, _said(res)
    found = json.loads(res.stdout)["findings"]
    errors = [f for f in found if f["severity"] == "error"]
    (said,) = errors
    assert said["code"] == "dense_replicas_across_nodes", errors
    assert said["severity"] == "error" and "the model is dense" in said["message"], said
    assert said["remedy"] == dense_replicas_remedy(2, 1, 2), said


def test_a_forced_launch_ends_saying_the_world_sizes_differ(
    cli: Cli, four: SimProcess, recipe: str
) -> None:
    inv = str(four.inventory)
    res = cli.run(
        "launch", recipe, "--inventory", inv, *HYBRID,
        "--force", "--wait", "--replace", "--ready-timeout", "40",
        env=TOKEN, timeout=240,
    )  # fmt: skip
    try:
        assert res.returncode == 1, _said(res)
        assert "did not answer /health within 40 s" in res.stderr, _said(res)
        remedy = res.stderr[res.stderr.rindex("remedy: ") :]
        # The plan's rendezvous is the head's ConnectX address; its port 29501 by default.
        assert "the ranks never met at the rendezvous tcp://" in remedy, _said(res)
        assert (
            "rank 0 on sim-spark-1 and rank 2 on sim-spark-3 said world_size=2, "
            "rank 1 on sim-spark-2 and rank 3 on sim-spark-4 said world_size=4"
        ) in remedy, _said(res)
        assert dense_replicas_remedy(2, 1, 2) in remedy, _said(res)
        assert "firewall" not in remedy, _said(res)
    finally:
        stopped = cli.run("stop", "--inventory", inv, timeout=120)
        assert stopped.returncode == 0, _said(stopped)
    status = cli.run("status", "--inventory", inv, timeout=60)
    assert "no spark-tui containers" in status.stderr, _said(status)

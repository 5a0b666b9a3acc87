"""`spark-tui images sync` on two lab nodes (real sshd, real dockerd, real OpenSSH between
them): an image only the head has reaches the worker node to node with the same image ID,
each node's line says what was done there; a second run sends nothing; --json says the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest
import yaml
from labkit import lab_guard
from test_lab_image_sync import head_only_image  # noqa: F401 - the fixture
from test_lab_model_sync import node_keys  # noqa: F401 - the fixture

from spark_tui.core.inventory import InventoryNode
from spark_tui.sim.lab import Lab

lab_guard()

pytestmark = pytest.mark.lab


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_TOKEN="hf_lab_secret_never_printed_3")
    return subprocess.run(
        [sys.executable, "-m", "spark_tui", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def _recipe(tmp_path: Path, image: str) -> Path:
    path = tmp_path / "image-sync.yaml"
    data = {
        "recipe_version": "2",
        "model": "lab-org/tiny-sync",
        "runtime": "vllm",
        "container": image,
        "defaults": {"port": 8000, "tensor_parallel": 2},
        "command": "vllm serve {model} --port {port} -tp {tensor_parallel}",
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_images_sync_cli_copies_node_to_node_and_says_what_it_did(
    lab: Lab,
    lab_nodes: list[InventoryNode],
    head_only_image: str,  # noqa: F811
    node_keys: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    ref = head_only_image
    inventory = tmp_path / "lab.yaml"
    lab.write_inventory(inventory)
    recipe = _recipe(tmp_path, ref)
    head, worker = (n.name for n in lab_nodes)

    done = _cli("images", "sync", str(recipe), "--inventory", str(inventory))
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert f"{head} -> {worker} over the link (root@{lab.node(2).address})" in out
    assert f"  {head}: {ref}: has it: the source for the others" in out
    assert f"  {worker}: {ref}: copied from {head}: " in out
    assert "hf_lab_secret" not in out + done.stderr
    ids = []
    for n in lab.nodes:
        client = docker.DockerClient(base_url=f"unix://{n.docker_socket}")
        ids.append(client.images.get(ref).id)
        client.close()
    assert ids[0] == ids[1]

    again = _cli("images", "sync", str(recipe), "--inventory", str(inventory), "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    doc = json.loads(again.stdout)
    rows = {r["node"]: r for r in doc["nodes"]}
    assert doc["ok"] is True and rows[worker]["sent_bytes"] == 0
    assert rows[worker]["outcome"] == "has it already (same image ID)"

"""`spark-tui images sync` on two lab nodes (real sshd, real dockerd, real OpenSSH between
them): an image only the head has reaches the worker node to node with the same image ID,
each node's line says what was done there; a second run sends nothing; --json says the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from labkit import cli, docker_client, lab_guard
from test_lab_image_sync import head_only_image  # noqa: F401 - the fixture
from test_lab_model_sync import node_keys  # noqa: F401 - the fixture

from spark_tui.core.inventory import InventoryNode
from spark_tui.sim.lab import Lab

lab_guard()

pytestmark = pytest.mark.lab


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
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_lab_secret_never_printed_3")
    ref = head_only_image
    inventory = tmp_path / "lab.yaml"
    lab.write_inventory(inventory)
    recipe = _recipe(tmp_path, ref)
    head, worker = (n.name for n in lab_nodes)

    done = cli("images", "sync", str(recipe), "--inventory", str(inventory))
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert f"{head} -> {worker} over the link (root@{lab.node(2).address})" in out
    assert f"  {head}: {ref}: has it: the source for the others" in out
    assert f"  {worker}: {ref}: copied from {head}: " in out
    assert "hf_lab_secret" not in out + done.stderr
    ids = []
    for index in (1, 2):
        client = docker_client(lab, index)
        ids.append(client.images.get(ref).id)
        client.close()
    assert ids[0] == ids[1]

    again = cli("images", "sync", str(recipe), "--inventory", str(inventory), "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    doc = json.loads(again.stdout)
    rows = {r["node"]: r for r in doc["nodes"]}
    assert doc["ok"] is True and rows[worker]["sent_bytes"] == 0
    assert rows[worker]["outcome"] == "has it already (same image ID)"

"""The sync actions of the service on simulated Sparks, through the CLI that renders them:
`models sync --json` (the model and its draft model relayed head to worker), `images sync`
(what was done per node; an image no node has fails with a remedy), an unreachable node
(exit 3), and the events' order as the cockpit sees them."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from pathlib import Path

import yaml
from ops_helpers import FAKE_HF_TOKEN

from spark_tui import cli
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.model_sync import repo_folder
from spark_tui.service import events as ev
from spark_tui.service.events import SyncDone, SyncFinished, SyncStarted
from spark_tui.service.session import Session
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base

MODEL, DRAFT = "sim-org/sync-main", "sim-org/sync-draft"
REV = "fedcba9876543210fedcba9876543210fedcba98"
GLM_IMAGE = "eugr/spark-vllm-b12x:nightly-20261015"  # every simulated node has it


def scenario(**kw: object) -> Scenario:
    return Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(2), pace=0.02, **kw)


def hub_of(home: Path) -> Path:
    return home / ".cache" / "huggingface" / "hub"


def put_model(home: Path, repo_id: str, size: int) -> None:
    repo = hub_of(home) / repo_folder(repo_id)
    snap = repo / "snapshots" / REV
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    for name, data in {
        "config.json": json.dumps({"model_type": "qwen2"}).encode(),
        "model.safetensors": hashlib.sha256(repo_id.encode()).digest() * (size // 32),
    }.items():
        digest = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / digest).write_bytes(data)
        (snap / name).symlink_to(f"../../blobs/{digest}")


def recipe_file(tmp_path: Path, container: str = "sim/vllm:latest") -> Path:
    spec = json.dumps({"model": DRAFT, "num_speculative_tokens": 2})
    data = {
        "recipe_version": "2",
        "model": MODEL,
        "model_revision": REV,
        "runtime": "vllm",
        "container": container,
        "defaults": {"port": 8000, "tensor_parallel": 2},
        "command": "vllm serve {model} --port {port} -tp {tensor_parallel} "
        f"--speculative-config '{spec}'",
    }
    path = tmp_path / "sync-spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


async def test_models_sync_json_says_per_node_what_was_done(tmp_path, capsys) -> None:
    async with SimCluster(scenario()) as sim:
        head, worker = (n.home for n in sim.nodes)
        put_model(head, MODEL, 128 * 1024)
        put_model(head, DRAFT, 32 * 1024)
        argv = ["models", "sync", str(recipe_file(tmp_path)), "--json"]
        argv += ["--inventory", str(sim.inventory_path)]
        try:
            code = await asyncio.to_thread(cli.main, argv)
            out = capsys.readouterr().out
            assert code == 0, out
            doc = json.loads(out)
            assert doc["ok"] is True and doc["failed_nodes"] == []
            assert doc["syncs"][0]["items"] == [MODEL, DRAFT]
            rows = {(r["node"], r["item"]): r for r in doc["nodes"]}
            h, w = (n.name for n in sim.nodes)
            assert set(rows) == {(h, MODEL), (h, DRAFT), (w, MODEL), (w, DRAFT)}
            assert rows[(h, MODEL)]["outcome"] == "has it: the source for the others"
            copied = rows[(w, MODEL)]
            assert copied["state"] == "complete" and copied["source"] == h
            assert copied["sent_bytes"] > 128 * 1024 and copied["outcome"].startswith(
                f"copied from {h}: "
            )
            assert any("relaying" in n["message"] for n in doc["notices"])
            assert FAKE_HF_TOKEN not in out

            code = await asyncio.to_thread(cli.main, argv)
            again = json.loads(capsys.readouterr().out)
            rows = {(r["node"], r["item"]): r for r in again["nodes"]}
            assert code == 0 and rows[(w, DRAFT)]["sent_bytes"] == 0
            assert rows[(w, DRAFT)]["outcome"] == "complete already (2 file(s), nothing sent)"
        finally:
            for home in (head, worker):
                for repo in (MODEL, DRAFT):
                    shutil.rmtree(hub_of(home) / repo_folder(repo), ignore_errors=True)


async def test_images_sync_says_each_node_has_the_heads_image(capsys) -> None:
    async with SimCluster(scenario()) as sim:
        argv = ["images", "sync", "glm-5.3-flash", "--inventory", str(sim.inventory_path)]
        code = await asyncio.to_thread(cli.main, argv)
        out = capsys.readouterr().out
        h, w = (n.name for n in sim.nodes)
        assert code == 0, out
        assert f"syncing glm-5.3-flash's image {GLM_IMAGE} on {h}, {w}" in out
        assert f"  {h}: {GLM_IMAGE}: has it: the source for the others" in out
        assert f"  {w}: {GLM_IMAGE}: has it already (same image ID)" in out
        assert f"complete on every node: {GLM_IMAGE}" in out


async def test_images_sync_on_a_subset_names_only_the_nodes_picked(capsys) -> None:
    three = Scenario(nodes=3, ssh_port=0, base_address=random_loopback_base(3), pace=0.02)
    async with SimCluster(three) as sim:
        h, left_out, picked = (n.name for n in sim.nodes)
        argv = ["images", "sync", "glm-5.3-flash", "--inventory", str(sim.inventory_path)]
        code = await asyncio.to_thread(cli.main, [*argv, "--on", f"{h},{picked}"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"syncing glm-5.3-flash's image {GLM_IMAGE} on {h}, {picked}\n" in out
        assert left_out not in out


async def test_images_sync_of_an_image_no_node_has_fails_with_a_remedy(tmp_path, capsys) -> None:
    absent = "sim-registry.invalid/nobody-has-it:1"
    async with SimCluster(scenario()) as sim:
        argv = ["images", "sync", str(recipe_file(tmp_path, container=absent))]
        code = await asyncio.to_thread(cli.main, [*argv, "--inventory", str(sim.inventory_path)])
        out = capsys.readouterr().out
        h, w = (n.name for n in sim.nodes)
        assert code == 1, out
        assert f"error: no node has {absent} and {h} could not pull it" in out
        assert f"remedy: build or load the image on {h}" in out
        assert f"  {w}: {absent}: failed: no node has {absent}" in out
        assert f"not complete on: {h}, {w}" in out


def test_images_sync_with_an_unreachable_node_exits_3(tmp_path, capsys) -> None:
    inventory = tmp_path / "inventory.yaml"
    # Port 9 on loopback: nothing listens, the connection is refused at once.
    nodes = [{"name": "gone-1", "host": "127.0.0.1", "port": 9, "user": "nobody"}]
    inventory.write_text(yaml.safe_dump({"nodes": nodes}))
    code = cli.main(["images", "sync", "glm-5.3-flash", "--inventory", str(inventory)])
    captured = capsys.readouterr()
    assert code == 3, captured
    assert "gone-1" in captured.err and "remedy:" in captured.err


async def test_the_image_sync_action_probes_announces_then_syncs() -> None:
    async with SimCluster(scenario()) as sim:
        session = Session(sim.inventory)
        try:
            events = [e async for e in session.sync_image(find_recipe("glm-5.3-flash"))]
        finally:
            await session.close()
    kinds = [type(e).__name__ for e in events]
    assert isinstance(events[0], ev.Probed) and isinstance(events[1], SyncStarted), kinds
    assert events[1].nodes == tuple(n.name for n in sim.inventory)
    assert isinstance(events[-1], SyncFinished) and events[-1].ok
    assert [e.node for e in events if isinstance(e, SyncDone)] == [sim.nodes[1].name]


async def test_model_copy_progress_never_goes_back_and_ends_at_the_total(tmp_path) -> None:
    from spark_tui.service.events import SyncProgress

    async with SimCluster(scenario()) as sim:
        head, worker = (n.home for n in sim.nodes)
        put_model(head, MODEL, 3 * 1024 * 1024)
        put_model(head, DRAFT, 1024 * 1024)
        session = Session(sim.inventory)
        try:
            recipe = find_recipe(str(recipe_file(tmp_path)))
            events = [e async for e in session.sync_models(recipe)]
        finally:
            await session.close()
            for home in (head, worker):
                for repo in (MODEL, DRAFT):
                    shutil.rmtree(hub_of(home) / repo_folder(repo), ignore_errors=True)
    assert isinstance(events[-1], SyncFinished) and events[-1].ok
    for item in (MODEL, DRAFT):
        done = [e.done_bytes for e in events if isinstance(e, SyncProgress) and e.item == item]
        assert done and done == sorted(done), f"{item}: progress went back: {done}"
        last = next(e for e in reversed(events) if isinstance(e, SyncProgress) and e.item == item)
        assert last.done_bytes == last.total_bytes and last.rate_bytes_per_s

"""`spark-tui models sync` on simulated Sparks: the model and its speculative draft model go
from the head to the worker (relayed here: simulated nodes cannot SSH to each other, and the
sync says so), the Hub layout is kept, a second run sends nothing, and HF_TOKEN appears in
no command the nodes ran."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from spark_tui import cli
from spark_tui.ops.model_sync import repo_folder
from spark_tui.sim.nodes import SimCluster

MODEL, DRAFT = "sim-org/tiny-main", "sim-org/tiny-draft"
REV = "89abcdef0123456789abcdef0123456789abcdef"
SECRET = "hf_sim_secret_never_shown_42"


def hub_of(home: Path) -> Path:
    return home / ".cache" / "huggingface" / "hub"


def put_model(home: Path, repo_id: str, size: int) -> dict[str, bytes]:
    repo = hub_of(home) / repo_folder(repo_id)
    snap = repo / "snapshots" / REV
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    contents = {
        "config.json": json.dumps({"model_type": "qwen2"}).encode(),
        "model.safetensors": hashlib.sha256(repo_id.encode()).digest() * (size // 32),
    }
    for name, data in contents.items():
        digest = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / digest).write_bytes(data)
        (snap / name).symlink_to(f"../../blobs/{digest}")
    return contents


def recipe_file(tmp_path: Path) -> Path:
    spec = json.dumps({"model": DRAFT, "num_speculative_tokens": 2})
    data = {
        "recipe_version": "2",
        "model": MODEL,
        "model_revision": REV,
        "runtime": "vllm",
        "container": "sim/vllm:latest",
        "defaults": {"port": 8000, "tensor_parallel": 2},
        "command": "vllm serve {model} --port {port} -tp {tensor_parallel} "
        f"--speculative-config '{spec}'",
    }
    path = tmp_path / "tiny-spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def snapshot(home: Path, repo_id: str) -> dict[str, bytes]:
    snap = hub_of(home) / repo_folder(repo_id) / "snapshots" / REV
    return {p.name: p.read_bytes() for p in snap.iterdir()}


async def test_models_sync_puts_model_and_draft_on_the_worker(
    sim_scenario, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", SECRET)
    async with SimCluster(sim_scenario(2)) as sim:
        head, worker = (n.home for n in sim.nodes)
        main = put_model(head, MODEL, 256 * 1024)
        draft = put_model(head, DRAFT, 64 * 1024)
        argv = ["models", "sync", str(recipe_file(tmp_path)), "--inventory"]
        argv.append(str(sim.inventory_path))
        try:
            code = await asyncio.to_thread(cli.main, argv)
            out = capsys.readouterr().out
            assert code == 0, out
            assert snapshot(worker, MODEL) == main and snapshot(worker, DRAFT) == draft
            assert (hub_of(worker) / repo_folder(DRAFT) / "refs" / "main").read_text() == REV
            assert "relaying the copy through this machine" in out
            assert f"complete on every node: {MODEL}, {DRAFT}" in out
            assert SECRET not in out

            code = await asyncio.to_thread(cli.main, argv)
            again = capsys.readouterr().out
            assert code == 0 and "2 file(s) already complete" in again
            assert "relaying" not in again  # nothing to send
        finally:
            for home in (head, worker):
                for repo in (MODEL, DRAFT):
                    shutil.rmtree(hub_of(home) / repo_folder(repo), ignore_errors=True)


async def test_models_sync_offline_without_a_copy_exits_1(
    sim_scenario, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    async with SimCluster(sim_scenario(2)) as sim:
        argv = ["models", "sync", str(recipe_file(tmp_path)), "--inventory"]
        code = await asyncio.to_thread(cli.main, [*argv, str(sim.inventory_path)])
        out = capsys.readouterr().out
        assert code == 1
        assert "HF_HUB_OFFLINE is set: nothing is downloaded" in out
        assert "remedy: unset HF_HUB_OFFLINE" in out
        assert "models sync" in out and str(sim.inventory_path) in out


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port held bound but never listening: every connection to it is refused
    (and no other server can take it meanwhile)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


async def test_models_sync_with_the_hub_unreachable_says_so_and_exits_1(
    sim_scenario, tmp_path, capsys, monkeypatch
) -> None:
    """No node has the model and this machine cannot reach the Hub (its connection is
    refused): a message with a remedy and exit 1, no traceback."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with refused_port() as port:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        async with SimCluster(sim_scenario(2)) as sim:
            argv = ["models", "sync", str(recipe_file(tmp_path)), "--inventory"]
            code = await asyncio.to_thread(cli.main, [*argv, str(sim.inventory_path)])
            captured = capsys.readouterr()
            out = captured.out + captured.err
            assert code == 1, out
            assert "Traceback" not in out
            assert f"error: {MODEL}: could not reach the Hub at http://127.0.0.1:" in out
            assert "remedy: check this machine's network access to the Hub" in out
            assert "HF_ENDPOINT" in out and str(sim.inventory_path) in out
            assert "not complete on:" in out
            assert ": waiting" not in out  # every node says the sync did not get there


async def test_models_sync_on_a_subset_leaves_the_other_nodes_alone(
    sim_scenario, tmp_path, capsys
) -> None:
    async with SimCluster(sim_scenario(3)) as sim:
        head, worker, other = sim.nodes
        main = put_model(head.home, MODEL, 64 * 1024)
        put_model(head.home, DRAFT, 16 * 1024)
        argv = ["models", "sync", str(recipe_file(tmp_path)), "--inventory"]
        argv += [str(sim.inventory_path), "--on", f"{head.name},{worker.name}"]
        try:
            code = await asyncio.to_thread(cli.main, argv)
            out = capsys.readouterr().out
            assert code == 0, out
            assert snapshot(worker.home, MODEL) == main
            # The node --on left out got nothing: another service may be using it.
            assert not (hub_of(other.home) / repo_folder(MODEL)).exists()
            assert other.name not in out
        finally:
            for node in (head, worker):
                for repo in (MODEL, DRAFT):
                    shutil.rmtree(hub_of(node.home) / repo_folder(repo), ignore_errors=True)

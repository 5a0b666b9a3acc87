"""The cockpit's sync key on the simulated Sparks (DemoSession, real SSH): a worker whose copy
of the model was cut short shows in the fit panel with the key as its remedy; the key opens
the sync view, the rest of the shard goes head to worker (resumed, with progress), each node
says what was done, and the fit panel is clear afterwards."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import yaml
from cockpit_helpers import results_text, static_text, wait_until

from spark_tui.ops.model_sync import repo_folder
from spark_tui.service.sync import THIS_MACHINE
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession
from spark_tui.ui.widgets.sync import SyncScreen

RECIPE = "nemotron-3-nano-30b-a3b-nvfp4"
MODEL = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
IMAGE = "ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest"
LEFT = 8 * 1024 * 1024  # what the cut-short shard lacks


def cut_short(home: Path) -> Path:
    """Make the first shard's blob a partial download lacking its last LEFT bytes (as an
    interrupted download leaves it); returns the blob."""
    repo = home / ".cache" / "huggingface" / "hub" / repo_folder(MODEL)
    rev = (repo / "refs" / "main").read_text().strip()
    link = repo / "snapshots" / rev / "model-00001-of-00004.safetensors"
    blob = link.resolve()
    size = blob.stat().st_size
    partial = blob.with_name(blob.name + ".incomplete")
    blob.rename(partial)
    os.truncate(partial, size - LEFT)
    return blob


def tiny_hub_recipe(repo_id: str) -> None:
    """A user recipe `tiny-hub` serving `repo_id` (a model no simulated node has) on 2 nodes."""
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui" / "recipes"
    folder.mkdir(parents=True, exist_ok=True)
    recipe = {
        "recipe_version": "2",
        "name": "tiny-hub",
        "model": repo_id,
        "runtime": "vllm",
        "container": IMAGE,
        "defaults": {"port": 8000, "tensor_parallel": 2},
        "command": "vllm serve {model} --port {port} -tp {tensor_parallel}",
    }
    (folder / "tiny-hub.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))


async def test_sync_key_resumes_the_shard_and_says_per_node_what_was_done() -> None:
    backend = DemoSession(pace=0.05, token_scale=0.05, base_address=random_loopback_base())
    app = SparkApp(backend, recipe=RECIPE, auto_refresh=False, handle_signals=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        head, worker = (n.name for n in backend.sim.nodes)
        blob = cut_short(backend.sim.nodes[1].home)
        size = blob.with_name(blob.name + ".incomplete").stat().st_size + LEFT
        await pilot.press("r")
        await wait_until(
            pilot, lambda: "incomplete" in static_text(app, "#fit-body"), 30, "the gap in the fit"
        )
        fit = static_text(app, "#fit-body")
        assert f"{worker} has {MODEL}" in fit and "press m to sync" in fit

        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, SyncScreen), 5, "the sync view")
        syncer = app.main.syncer
        await wait_until(pilot, lambda: not syncer.running, 60, "the sync")
        tally = syncer.tally
        assert tally is not None and tally.ok, [n.message for n in tally.notices]
        row = tally.row(worker, MODEL)
        assert row.state == "complete" and row.source == head
        assert row.sent_bytes == LEFT and row.skipped > 0
        assert row.rate_bytes_per_s is not None, "progress with a rate reached the view"
        assert tally.row(head, MODEL).role == "source"
        assert tally.row(worker, IMAGE).outcome == "has it already (same image ID)"
        await pilot.pause(0.3)
        view = static_text(app, "#sync-view")
        assert f"copied from {head}: 0.01 GB" in view and "complete on every node" in view
        assert "relaying the copy through this machine" in view  # the nodes cannot SSH
        assert (
            blob.stat().st_size == size and not blob.with_name(blob.name + ".incomplete").exists()
        )

        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, SyncScreen), 5, "closed")
        await wait_until(
            pilot, lambda: "incomplete" not in static_text(app, "#fit-body"), 30, "fit clear"
        )
        assert "model and image complete on every node" in results_text(app)
    await backend.close()


async def test_a_model_no_node_has_comes_once_from_the_demos_simulated_hub() -> None:
    from spark_tui.sim.hub.repos import SafetensorsFile, model_repo

    repo_id = "sim-org/tiny-hub-model"
    shards = {
        "model-00001-of-00002.safetensors": SafetensorsFile(("a.weight",), 96 * 1024),
        "model-00002-of-00002.safetensors": SafetensorsFile(("b.weight",), 64 * 1024),
    }
    tiny_hub_recipe(repo_id)
    backend = DemoSession(pace=0.05, base_address=random_loopback_base())
    app = SparkApp(backend, recipe="tiny-hub", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        head, worker = (n.name for n in backend.sim.nodes)
        fit = static_text(app, "#fit-body")
        assert f"{worker} has no copy of {repo_id}" in fit and "press m to sync" in fit
        backend.sync_env()  # the simulated Hub, as the sync starts it
        backend.hub.add(model_repo(repo_id, {"model_type": "qwen2", "hidden_size": 64}, shards))

        await pilot.press("m")
        syncer = app.main.syncer
        await wait_until(pilot, lambda: syncer.tally is not None and not syncer.running, 60, "sync")
        tally = syncer.tally
        assert tally.ok, [f"{n.message} / {n.remedy}" for n in tally.notices]
        assert tally.row(head, repo_id).state == "complete"
        assert tally.row(worker, repo_id).source == head  # node to node, not a second download
        if (THIS_MACHINE, repo_id) in tally.rows:  # no Hub CLI on the head: fetched here
            assert tally.row(THIS_MACHINE, repo_id).state == "complete"
            assert tally.row(head, repo_id).source == THIS_MACHINE
        assert all(r.finished for r in tally.rows.values()), tally.rows
        # Each shard downloaded once (the fit check's Hub facts read only their headers, by
        # range).
        gets = [
            r
            for r in backend.hub.requests
            if r.method == "GET" and "model-0000" in r.path and not r.range
        ]
        assert len(gets) == len(shards)
        for node in backend.sim.nodes:
            snap = node.home / ".cache" / "huggingface" / "hub" / repo_folder(repo_id) / "snapshots"
            sizes = {p.name: p.stat().st_size for p in next(snap.iterdir()).iterdir()}
            assert all(sizes[name] == f.size for name, f in shards.items()), sizes
        await pilot.press("escape")
        await wait_until(
            pilot, lambda: "has no copy" not in static_text(app, "#fit-body"), 30, "fit clear"
        )
    await backend.close()


class RefusingHub:
    """In place of the demo's simulated Hub: a loopback port held bound but never listening,
    so every connection to it is refused (and no other server can take the port)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def start(self) -> RefusingHub:
        return self

    def stop(self) -> None:
        self.sock.close()


async def test_with_the_hub_unreachable_the_sync_view_ends_with_the_error_and_its_remedy(
    monkeypatch,
) -> None:
    """No node has the model and the Hub refuses connections (the demo's simulated Hub,
    refusing connections): the view does not stay "downloading": every row of the model ends failed with
    the reason, the remedy is shown, the image sync still runs, and the key starts anew."""
    import spark_tui.sim.hub

    monkeypatch.setattr(spark_tui.sim.hub, "catalogue_hub", lambda token: RefusingHub())
    repo_id = "sim-org/unreachable-model"
    tiny_hub_recipe(repo_id)
    backend = DemoSession(pace=0.05, base_address=random_loopback_base())
    app = SparkApp(backend, recipe="tiny-hub", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, SyncScreen), 5, "the sync view")
        syncer = app.main.syncer
        await wait_until(pilot, lambda: syncer.tally is not None and not syncer.running, 60, "end")
        tally = syncer.tally
        assert tally.done and not tally.ok
        for node in backend.sim.nodes:
            row = tally.row(node.name, repo_id)
            assert row.state == "failed", (node.name, row)
            assert row.error is not None and "could not reach the Hub" in row.error
        assert tally.row(backend.sim.nodes[1].name, IMAGE).finished  # the image sync ran
        await pilot.pause(0.3)
        view = static_text(app, "#sync-view")
        assert "downloading" not in view and "waiting" not in view
        assert "could not reach the Hub at http://127.0.0.1:" in view
        assert "check this machine's network access to the Hub" in view
        assert "not complete on every node" in view
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, SyncScreen), 5, "closed")
        assert "tiny-hub: sync not complete on" in results_text(app)
    await backend.close()


async def test_a_fault_inside_the_sync_still_ends_the_view(monkeypatch, tmp_path) -> None:
    """A fault of ours in the middle of the model sync (not an error with a remedy): the
    cockpit says so and keeps its details in the crash log, and the view ends anyway: no
    row stays "waiting" or "downloading"."""
    from spark_tui.ops import model_sync

    async def broken(self: object, needs: object, emit: object) -> bool:
        raise RuntimeError("a fault inside the sync")

    monkeypatch.setattr(model_sync.ModelSync, "run", broken)
    monkeypatch.setenv("SPARK_TUI_CRASH_LOG", str(tmp_path / "crash.log"))
    tiny_hub_recipe("sim-org/never-synced")
    backend = DemoSession(pace=0.05, base_address=random_loopback_base())
    app = SparkApp(backend, recipe="tiny-hub", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        await pilot.press("m")
        syncer = app.main.syncer
        await wait_until(pilot, lambda: syncer.tally is not None and not syncer.running, 60, "end")
        tally = syncer.tally
        assert tally.done and not tally.ok
        assert all(r.state == "failed" for r in tally.rows.values()), tally.rows
        await pilot.pause(0.3)
        view = static_text(app, "#sync-view")
        assert "the sync stopped on an unexpected error" in view
        assert "waiting" not in view and "downloading" not in view
        await wait_until(
            pilot, lambda: "a fault inside the sync" in results_text(app), 5, "the error shown"
        )
        assert "a fault inside the sync" in (tmp_path / "crash.log").read_text()
    await backend.close()


async def test_the_demo_downloads_from_a_simulated_hub_only() -> None:
    backend = DemoSession(base_address=random_loopback_base())
    try:
        await backend.start()
        env = backend.sync_env()
        import httpx

        async with httpx.AsyncClient() as client:
            info = await client.get(f"{env['HF_ENDPOINT']}/api/models/{MODEL}")
        assert info.status_code == 200 and info.json()["id"] == MODEL
        assert env["HF_ENDPOINT"].startswith("http://127.0.0.1:")
        assert backend.sync_cache is not None and backend.state_dir is not None
        assert backend.sync_cache.is_relative_to(backend.state_dir)
    finally:
        await backend.close()

"""The cockpit's sync key on the simulated Sparks (DemoSession, real SSH): a worker whose copy
of the model was cut short shows in the fit panel with the key as its remedy; the key opens
the sync view, the rest of the shard goes head to worker (resumed, with progress), each node
says what was done, and the fit panel is clear afterwards."""

from __future__ import annotations

import os
from pathlib import Path

from cockpit_helpers import results_text, static_text, wait_until

from spark_tui.ops.model_sync import repo_folder
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

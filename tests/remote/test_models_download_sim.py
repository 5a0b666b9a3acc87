"""`models sync` when no node has the model: downloaded once (on the head, from the simulated
Hub reached through HF_ENDPOINT), then copied to the worker; the Hub is asked for each file
once, by the head only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spark_tui.core.model_presence import ModelNeed
from spark_tui.ops.events import Notice, SyncDone, SyncFinished, SyncStep
from spark_tui.ops.model_sync import ModelSync, repo_folder
from spark_tui.remote.probe import probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.service.event_stream import streamed
from spark_tui.sim.hub.repos import SafetensorsFile, model_repo
from spark_tui.sim.hub.server import SimulatedHub
from spark_tui.sim.nodes import SimCluster

REPO = "sim-org/fresh-model"
SHARDS = {
    "model-00001-of-00002.safetensors": SafetensorsFile(("a.weight",), 96 * 1024),
    "model-00002-of-00002.safetensors": SafetensorsFile(("b.weight",), 64 * 1024),
}


def snapshot_sizes(home: Path, rev: str) -> dict[str, int]:
    snap = home / ".cache" / "huggingface" / "hub" / repo_folder(REPO) / "snapshots" / rev
    return {p.name: p.stat().st_size for p in snap.iterdir()}


async def test_downloaded_once_on_the_head_then_copied(sim_scenario, tmp_path) -> None:
    repo = model_repo(REPO, {"model_type": "qwen2", "hidden_size": 64}, SHARDS)
    rev = repo.refs["main"]
    with SimulatedHub([repo]) as hub:
        async with SimCluster(sim_scenario(2)) as sim:
            async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
                facts = await probe_pool(pool, docker=False)
                env = {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "hf_secret_never_shown_7"}
                run = ModelSync(pool, facts, "fresh", env=env, local_cache=tmp_path / "hf")
                events = [e async for e in streamed(run.run, [ModelNeed("model", REPO, None)])]
            notices = [f"{e.message} / {e.remedy}" for e in events if isinstance(e, Notice)]
            assert isinstance(events[-1], SyncFinished) and events[-1].ok, notices
            steps = [e for e in events if isinstance(e, SyncStep) and e.action == "download"]
            assert steps, "a download step is announced"
            head, worker = (n.home for n in sim.nodes)
            expected = {"config.json", "model.safetensors.index.json", *SHARDS}
            for home in (head, worker):
                sizes = snapshot_sizes(home, rev)
                assert set(sizes) == expected
                assert all(sizes[n] == SHARDS[n].size for n in SHARDS)
            done = [e for e in events if isinstance(e, SyncDone)]
            # Sent to the head from where it was downloaded (here, or on the head itself when
            # its Hub CLI works: then only the worker gets a copy), then head to worker.
            assert [d.node for d in done][-1] == sim.nodes[1].name
            assert done[-1].source == sim.nodes[0].name
            shard_gets = [r for r in hub.requests if r.method == "GET" and "model-0000" in r.path]
            assert len(shard_gets) == len(SHARDS)  # once each: the worker got it from the head
            assert all(r.authorized for r in hub.requests)  # the token reached the download
            assert not any("hf_secret" in str(e) for e in events)


@pytest.mark.parametrize("where", ["head", "here"])
async def test_only_the_files_vllm_reads_are_downloaded_and_copied(
    sim_scenario, tmp_path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A repo that also carries PyTorch .bin copies of its weights, a consolidated file the
    index does not name and the vendor's original/ checkpoint: the sync fetches the shards
    the index names and the small files; the Hub is never asked for the others. Both ways
    of downloading: the head's Hub CLI (`hf download`, from huggingface_hub in the venv
    that the simulated node's shell finds), and this machine (the head has no CLI)."""
    from spark_tui.ops import model_sync

    if where == "here":
        monkeypatch.setattr(model_sync, "HAS_HUB_CLI", "false")
    unused = {
        "pytorch_model-00001-of-00002.bin": b"b" * 90_000,
        "pytorch_model-00002-of-00002.bin": b"b" * 60_000,
        "consolidated.safetensors": SafetensorsFile(("a.weight", "b.weight"), 150 * 1024),
        "original/consolidated.00.pth": b"o" * 150_000,
        "flax_model.msgpack": b"f" * 10_000,
    }
    small = {"tokenizer.json": b'{"version": "1.0"}\n', "generation_config.json": b"{}\n"}
    repo = model_repo(
        REPO, {"model_type": "qwen2", "hidden_size": 64}, SHARDS, extra={**unused, **small}
    )
    rev = repo.refs["main"]
    with SimulatedHub([repo]) as hub:
        async with SimCluster(sim_scenario(2)) as sim:
            if where == "head":
                # The real `hf` CLI of the huggingface_hub this suite runs with.
                hf = sim.state_dir / "bin" / "hf"
                hf.write_text(
                    f'#!/bin/sh\nexec "{sys.executable}" -c '
                    '"import sys; from huggingface_hub.cli.hf import main; sys.exit(main())" "$@"\n'
                )
                hf.chmod(0o755)
            async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
                facts = await probe_pool(pool, docker=False)
                env = {"HF_ENDPOINT": hub.endpoint}
                run = ModelSync(pool, facts, "fresh", env=env, local_cache=tmp_path / "hf")
                events = [e async for e in streamed(run.run, [ModelNeed("model", REPO, None)])]
            notices = [f"{e.message} / {e.remedy}" for e in events if isinstance(e, Notice)]
            assert isinstance(events[-1], SyncFinished) and events[-1].ok, notices
            said = [e.message for e in events if isinstance(e, SyncStep) and e.action == "download"]
            on_head = f"downloading {REPO} on {sim.nodes[0].name}"
            assert (on_head in said) == (where == "head"), (said, notices)
            asked = [(r.method, r.path, r.status) for r in hub.requests]
            assert not any("download" in n for n in notices), (notices, asked)
            expected = {"config.json", "model.safetensors.index.json", *SHARDS, *small}
            for node in sim.nodes:
                assert set(snapshot_sizes(node.home, rev)) == expected, node.name
            fetched = {r.path for r in hub.requests if r.method == "GET"}
            for name in unused:
                assert not any(path.endswith(name) for path in fetched), name
            assert any(path.endswith("model-00001-of-00002.safetensors") for path in fetched)

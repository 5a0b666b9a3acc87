"""`models sync` on the lab (real sshd, real OpenSSH between the nodes): the model goes from
the head to the worker node to node (the head's own ssh to the worker's link address),
complete files are skipped, an interrupted copy resumes where it stopped, and offline no
download is tried."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from labkit import lab_guard

from spark_tui.core.inventory import InventoryNode
from spark_tui.core.model_presence import ModelNeed
from spark_tui.ops.events import Notice, SyncDone, SyncFinished, SyncProgress, SyncStep, SyncUpdate
from spark_tui.ops.model_sync import ModelSync, repo_folder
from spark_tui.remote.probe import probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.service.event_stream import streamed
from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.sshd import generate_key

lab_guard()


def notices(events: list[SyncUpdate]) -> list[str]:
    return [f"{e.message} / {e.remedy}" for e in events if isinstance(e, Notice)]


pytestmark = pytest.mark.lab

REPO = "lab-org/tiny-sync"
REV = "0123456789abcdef0123456789abcdef01234567"
SHARD = 3 * 1024 * 1024 + 17  # not a whole number of dd blocks


def hub_of(home: Path) -> Path:
    return home / ".cache" / "huggingface" / "hub"


def put_model(home: Path, shard_bytes: int = SHARD, sparse: bool = False) -> dict[str, bytes]:
    """A Hub-layout snapshot (blobs, links, refs/main) of a two-shard model in `home`."""
    repo = hub_of(home) / repo_folder(REPO)
    snap = repo / "snapshots" / REV
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = {
        "metadata": {"total_size": 2 * shard_bytes},
        "weight_map": {"a": names[0], "b": names[1]},
    }
    contents: dict[str, bytes] = {
        "config.json": json.dumps({"model_type": "qwen2", "hidden_size": 256}).encode(),
        "model.safetensors.index.json": json.dumps(index).encode(),
    }
    for i, name in enumerate(names):
        contents[name] = b"" if sparse else bytes([i + 1]) * shard_bytes
    for name, data in contents.items():
        digest = hashlib.sha256(name.encode() + data).hexdigest()
        blob = repo / "blobs" / digest
        if sparse and name.endswith(".safetensors"):
            with blob.open("wb") as f:
                f.truncate(shard_bytes)
        else:
            blob.write_bytes(data)
        (snap / name).symlink_to(f"../../blobs/{digest}")
    return contents


@pytest.fixture
def homes(lab: Lab) -> Iterator[tuple[Path, Path]]:
    head, worker = lab.node(1).home, lab.node(2).home
    yield head, worker
    for home in (head, worker):
        shutil.rmtree(hub_of(home) / repo_folder(REPO), ignore_errors=True)


@pytest.fixture
def node_keys(lab: Lab) -> Iterator[None]:
    """Let the head SSH to the worker as a Spark cluster is set up: its own key, authorized
    on the worker, and the worker's host key in the head's known_hosts."""
    ssh_dir = lab.node(1).home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    generate_key(ssh_dir / "id_ed25519", "lab-head")
    auth = lab.cfg.authorized_keys
    before = auth.read_text()
    auth.write_text(before + (ssh_dir / "id_ed25519.pub").read_text())
    (ssh_dir / "known_hosts").write_text(lab.cfg.known_hosts.read_text())
    yield
    auth.write_text(before)
    shutil.rmtree(ssh_dir)


async def sync(
    nodes: list[InventoryNode], env: dict[str, str] | None = None, stop_at: float | None = None
) -> list[SyncUpdate]:
    """The events of one sync; `stop_at` cancels it once a copy is that far (0..1)."""
    events: list[SyncUpdate] = []
    async with ConnectionPool(nodes) as pool:
        facts = await probe_pool(pool, docker=False)
        run = ModelSync(pool, facts, "tiny", env=env or {}, where="--inventory lab.yaml")
        gen = streamed(run.run, [ModelNeed("model", REPO, None)])
        async for ev in gen:
            events.append(ev)
            frac = ev.fraction if isinstance(ev, SyncProgress) else None
            # Inside a shard: past the small files, more than a megabyte of it on its way.
            moving = isinstance(ev, SyncProgress) and ev.done_bytes > 1_000_000
            if stop_at is not None and frac is not None and moving and stop_at <= frac < 1.0:
                await gen.aclose()
                break
    return events


def snapshot_bytes(home: Path) -> dict[str, bytes]:
    snap = hub_of(home) / repo_folder(REPO) / "snapshots" / REV
    return {p.name: p.read_bytes() for p in snap.iterdir() if p.exists()}


def test_copy_goes_node_to_node_and_keeps_the_hub_layout(
    lab: Lab, lab_nodes: list[InventoryNode], homes: tuple[Path, Path], node_keys: None
) -> None:
    head, worker = homes
    contents = put_model(head)
    events = asyncio.run(sync(lab_nodes))
    assert isinstance(events[-1], SyncFinished) and events[-1].ok, notices(events)
    assert not [e for e in events if isinstance(e, Notice)], "no relay, no error"
    copy = next(e for e in events if isinstance(e, SyncStep) and e.action == "copy")
    assert f"over ConnectX link (root@{lab.node(2).address})" in copy.message
    assert snapshot_bytes(worker) == contents
    snap = hub_of(worker) / repo_folder(REPO) / "snapshots" / REV
    assert all((snap / n).is_symlink() for n in contents)
    assert (hub_of(worker) / repo_folder(REPO) / "refs" / "main").read_text() == REV
    done = next(e for e in events if isinstance(e, SyncDone))
    assert done.node == lab_nodes[1].name and done.sent_bytes == sum(map(len, contents.values()))

    again = asyncio.run(sync(lab_nodes))  # everything complete: nothing sent
    done = next(e for e in again if isinstance(e, SyncDone))
    assert (done.sent_bytes, done.skipped) == (0, len(contents))
    assert not [e for e in again if isinstance(e, SyncProgress)]


def test_partial_and_complete_files_are_resumed_and_skipped(
    lab_nodes: list[InventoryNode], homes: tuple[Path, Path], node_keys: None
) -> None:
    head, worker = homes
    contents = put_model(head)
    src_repo = hub_of(head) / repo_folder(REPO)
    dst_repo = hub_of(worker) / repo_folder(REPO)
    shutil.copytree(src_repo / "refs", dst_repo / "refs")
    (dst_repo / "snapshots" / REV).mkdir(parents=True)
    (dst_repo / "blobs").mkdir()
    # config.json complete on the worker; shard 1 cut at a third (as a broken copy leaves it).
    for name, cut in (("config.json", None), ("model-00001-of-00002.safetensors", SHARD // 3)):
        blob = os.readlink(src_repo / "snapshots" / REV / name)
        digest = blob.rsplit("/", 1)[1]
        data = contents[name]
        if cut is None:
            (dst_repo / "blobs" / digest).write_bytes(data)
            (dst_repo / "snapshots" / REV / name).symlink_to(blob)
        else:
            (dst_repo / "blobs" / (digest + ".incomplete")).write_bytes(data[:cut])
    events = asyncio.run(sync(lab_nodes))
    assert isinstance(events[-1], SyncFinished) and events[-1].ok, notices(events)
    copy = next(e for e in events if isinstance(e, SyncStep) and e.action == "copy")
    assert "3 file(s)" in copy.message and "(1 complete, skipped; 1 resumed)" in copy.message
    done = next(e for e in events if isinstance(e, SyncDone))
    expected = sum(len(contents[n]) for n in contents if n != "config.json") - SHARD // 3
    assert done.sent_bytes == expected
    assert snapshot_bytes(worker) == contents
    assert not list(dst_repo.rglob("*.incomplete"))


def test_an_interrupted_copy_resumes(
    lab_nodes: list[InventoryNode], homes: tuple[Path, Path], node_keys: None
) -> None:
    head, worker = homes
    big = 1024 * 1024 * 1024  # sparse on the head: long enough to be stopped on the way
    put_model(head, shard_bytes=big, sparse=True)
    first = asyncio.run(sync(lab_nodes, stop_at=0.0))
    assert not any(isinstance(e, SyncFinished) for e in first)
    dst_repo = hub_of(worker) / repo_folder(REPO)
    parts = list(dst_repo.rglob("*.incomplete"))
    # The closed channel ended the pipeline on the head: the part stops growing.
    sizes = [p.stat().st_size for p in parts]
    assert len(parts) == 1 and 0 < sizes[0] < big
    events = asyncio.run(sync(lab_nodes))
    assert isinstance(events[-1], SyncFinished) and events[-1].ok, notices(events)
    copy = next(e for e in events if isinstance(e, SyncStep) and e.action == "copy")
    assert "1 resumed" in copy.message
    done = next(e for e in events if isinstance(e, SyncDone))
    assert done.sent_bytes < 2 * big + 1000
    snap = dst_repo / "snapshots" / REV
    assert [
        (snap / n).stat().st_size
        for n in sorted(os.listdir(snap))
        if "safetensors." not in n and n.endswith(".safetensors")
    ] == [big, big]


def test_without_node_keys_the_copy_is_relayed_with_a_warning(
    lab_nodes: list[InventoryNode], homes: tuple[Path, Path]
) -> None:
    head, worker = homes
    contents = put_model(head)
    events = asyncio.run(sync(lab_nodes))
    assert isinstance(events[-1], SyncFinished) and events[-1].ok, notices(events)
    warn = next(e for e in events if isinstance(e, Notice))
    assert warn.level == "warning" and "relaying the copy through this machine" in warn.message
    assert warn.remedy and "authorized_keys" in warn.remedy
    assert snapshot_bytes(worker) == contents


def test_offline_refuses_to_download(
    lab_nodes: list[InventoryNode], homes: tuple[Path, Path]
) -> None:
    head, worker = homes
    events = asyncio.run(sync(lab_nodes, env={"HF_HUB_OFFLINE": "1"}))
    assert isinstance(events[-1], SyncFinished) and not events[-1].ok
    err = next(e for e in events if isinstance(e, Notice))
    assert err.level == "error" and "HF_HUB_OFFLINE is set: nothing is downloaded" in err.message
    assert err.remedy and "spark-tui models sync tiny --inventory lab.yaml" in err.remedy
    assert not (hub_of(head) / repo_folder(REPO)).exists()
    assert not (hub_of(worker) / repo_folder(REPO)).exists()

"""The image on every node, on the lab (real dockerd per node, real OpenSSH between them): an
image only the head has (made there, no registry) reaches the worker by `docker save |
docker load` node to node with the same image ID; a second sync sends nothing."""

from __future__ import annotations

import asyncio
import io
import tarfile
import uuid
from collections.abc import Iterator

import docker
import pytest
from labkit import lab_guard
from test_lab_model_sync import node_keys  # noqa: F401 - the fixture

from spark_tui.core.inventory import InventoryNode
from spark_tui.ops.events import Notice, SyncDone, SyncFinished, SyncProgress, SyncStep, SyncUpdate
from spark_tui.ops.image_sync import ImageSync
from spark_tui.remote.probe import probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.service.event_stream import streamed
from spark_tui.sim.lab import Lab

lab_guard()


def notices(events: list[SyncUpdate]) -> list[str]:
    return [f"{e.message} / {e.remedy}" for e in events if isinstance(e, Notice)]


pytestmark = pytest.mark.lab


def _rootfs(payload: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("data.bin")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


@pytest.fixture
def head_only_image(lab: Lab) -> Iterator[str]:
    """An image imported on the head only (as a locally built one is)."""
    ref = f"lab-local/sync-{uuid.uuid4().hex[:8]}:1"
    clients = [docker.DockerClient(base_url=f"unix://{n.docker_socket}") for n in lab.nodes]
    repo, tag = ref.rsplit(":", 1)
    clients[0].api.import_image_from_data(
        _rootfs(uuid.uuid4().bytes * 200_000), repository=repo, tag=tag
    )
    yield ref
    for c in clients:
        try:
            c.images.remove(ref, force=True)
        except docker.errors.ImageNotFound:
            pass
        c.close()


async def sync(nodes: list[InventoryNode], ref: str) -> list[SyncUpdate]:
    async with ConnectionPool(nodes) as pool:
        facts = await probe_pool(pool, docker=False)
        return [e async for e in streamed(ImageSync(pool, facts, ref).run)]


def test_head_built_image_reaches_the_worker_node_to_node(
    lab: Lab,
    lab_nodes: list[InventoryNode],
    head_only_image: str,
    node_keys: None,  # noqa: F811
) -> None:
    ref = head_only_image
    events = asyncio.run(sync(lab_nodes, ref))
    assert isinstance(events[-1], SyncFinished) and events[-1].ok, notices(events)
    copy = next(e for e in events if isinstance(e, SyncStep) and e.action == "copy")
    assert f"over the link (root@{lab.node(2).address})" in copy.message
    assert not [e for e in events if isinstance(e, Notice) and e.level != "info"]
    assert [e for e in events if isinstance(e, SyncProgress)], "progress while copying"
    ids = []
    for n in lab.nodes:
        client = docker.DockerClient(base_url=f"unix://{n.docker_socket}")
        ids.append(client.images.get(ref).id)
        client.close()
    assert ids[0] == ids[1]
    done = next(e for e in events if isinstance(e, SyncDone))
    assert done.source == lab_nodes[0].name and done.sent_bytes > 3_000_000

    again = asyncio.run(sync(lab_nodes, ref))
    done = next(e for e in again if isinstance(e, SyncDone))
    assert done.sent_bytes == 0 and not [e for e in again if isinstance(e, SyncProgress)]


def test_without_node_keys_the_image_is_relayed(
    lab: Lab, lab_nodes: list[InventoryNode], head_only_image: str
) -> None:
    events = asyncio.run(sync(lab_nodes, head_only_image))
    assert isinstance(events[-1], SyncFinished) and events[-1].ok, notices(events)
    assert any(
        isinstance(e, Notice) and "relaying the image through this machine" in e.message
        for e in events
    )
    client = docker.DockerClient(base_url=f"unix://{lab.node(2).docker_socket}")
    assert client.images.get(head_only_image).id
    client.close()

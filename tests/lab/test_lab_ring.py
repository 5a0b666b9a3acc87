"""Three lab nodes cabled as a ring (`spark-tui lab up --nodes 3 --ring`: a veth pair and a
subnet per cable between the namespaces, real sshd and dockerd, the bridge as their LAN):
the probe recognises the ring from each node's ports and neighbours, and a pipeline over
the three launches on the stand-in image, its data on the cables and its rendezvous on the
LAN, reaches ready and stops clean. One lab for the module."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest
from labkit import (
    all_containers,
    lab_guard,
    running_lab,
    sweep_stale_test_labs,
    unique_config,
)

from spark_tui.core import wiring as w
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.config import LAN_IFNAME

lab_guard()

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def ring_lab() -> Iterator[Lab]:
    """Three stand-in lab nodes on a ring for this module; down (and checked clean) at its end."""
    sweep_stale_test_labs()
    cfg = unique_config(3, memory_gb=128, pace=0.05, token_scale=0.02, ring=True)
    with running_lab(cfg) as the_lab:
        yield the_lab


async def test_ring_is_probed_and_a_pipeline_over_it_launches(ring_lab: Lab) -> None:
    session = Session(ring_lab.inventory_nodes())
    try:
        probed = [e async for e in session.discover() if isinstance(e, ev.Probed)]
        assert probed and not probed[-1].errors, probed[-1].errors if probed else None
        wiring = w.wiring_of(probed[-1].nodes)
        assert wiring.kind == w.RING, wiring.describe()
        assert sorted(link.subnet for link in wiring.links) == [
            "10.79.1.0/24",
            "10.79.2.0/24",
            "10.79.3.0/24",
        ]
        assert all(link.answered for link in wiring.links), wiring.describe()
        layout = {
            "tensor_parallel": "1",
            "pipeline_parallel": "3",
            "bootstrap_interface": LAN_IFNAME,
        }
        events = [
            e
            async for e in session.launch(find_recipe("gpt-oss-120b-cluster"), layout, follow=False)
        ]
        asked = [e for e in events if isinstance(e, ev.Question)]
        assert not asked, [(q.kind, q.text) for q in asked]
        assert any(isinstance(e, ev.ClusterReady) for e in events), [
            type(e).__name__ for e in events
        ][-10:]
        running = await session.running()
        assert running is not None and len(running.ranks) == 3
        for node in ring_lab.nodes:
            env = _rank_env(node.docker_socket)
            # The pipeline's data on both cables, its rendezvous over the LAN.
            assert sorted(env["UCX_NET_DEVICES"].split(",")) == ["enp1s0f0np0", "enp1s0f1np1"]
            assert env["GLOO_SOCKET_IFNAME"] == LAN_IFNAME
            assert env["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1"
        stopped = [e async for e in session.stop() if isinstance(e, ev.Stopped)]
        assert stopped and stopped[0].left == [] and len(stopped[0].removed) == 3
    finally:
        await session.close()
    assert not any(all_containers(ring_lab).values()), all_containers(ring_lab)


def _rank_env(socket: object) -> dict[str, str]:
    """The environment of the one container of ours on a node (through its dockerd)."""
    client = docker.DockerClient(base_url=f"unix://{socket}")
    try:
        (container,) = client.containers.list(filters={"label": "spark-tui.cluster"})
        items = container.attrs["Config"]["Env"]
    finally:
        client.close()
    return dict(item.partition("=")[::2] for item in items)

"""Four lab nodes with the stand-in image (`spark-tui lab up --nodes 4`: real sshd and
dockerd in namespaces): TP 4, TP 2 x PP 2, TP 2 x DP 2 and DP 4 of the bundled
gpt-oss-120b-cluster launch through the product's Session, reach ready with every rank's
log streamed and classified, pass the smoke checks and stop with no container left.
One lab for the module, the layouts one after the other on it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from labkit import (
    all_containers,
    lab_guard,
    running_lab,
    sweep_stale_test_labs,
    unique_config,
)

from spark_tui.core.errors import InputError
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.sim.lab import Lab

lab_guard()

pytestmark = pytest.mark.lab

LAYOUTS = {
    "tp4": {},
    "tp2xpp2": {"tensor_parallel": "2", "pipeline_parallel": "2"},
    "tp2xdp2": {"tensor_parallel": "2", "data_parallel": "2"},
    "dp4": {"tensor_parallel": "1", "data_parallel": "4"},
}


@pytest.fixture(scope="module")
def lab4() -> Iterator[Lab]:
    """Four stand-in lab nodes for this module; down (and checked clean) at its end."""
    sweep_stale_test_labs()
    cfg = unique_config(4, memory_gb=128, pace=0.05, token_scale=0.02)
    with running_lab(cfg) as the_lab:
        yield the_lab


@pytest.mark.parametrize("layout", list(LAYOUTS))
async def test_layout_on_four_lab_nodes(lab4: Lab, layout: str) -> None:
    session = Session(lab4.inventory_nodes())
    try:
        events = [
            e
            async for e in session.launch(
                find_recipe("gpt-oss-120b-cluster"), LAYOUTS[layout], follow=False
            )
        ]
        asked = [e for e in events if isinstance(e, ev.Question)]
        assert not asked, [(q.kind, q.text) for q in asked]
        assert any(isinstance(e, ev.ClusterReady) for e in events)
        running = await session.running()
        assert running is not None and len(running.ranks) == 4
        for rank in range(4):
            states = [
                e.state for e in events if isinstance(e, ev.RankStateChanged) and e.rank == rank
            ]
            assert states and states[-1] is ev.RankState.READY, (rank, states)
            kinds = Counter(e.kind for e in events if isinstance(e, ev.LogLine) and e.rank == rank)
            assert kinds["progress"] > 0 and kinds["phase"] > 0, (layout, rank, kinds)
        smoke = [e async for e in session.smoke() if isinstance(e, ev.SmokeDone)]
        assert smoke and smoke[0].ok, [(r.name, r.ok, r.detail) for r in smoke[0].results]
        stopped = [e async for e in session.stop() if isinstance(e, ev.Stopped)]
        assert stopped and stopped[0].left == [] and len(stopped[0].removed) == 4
    finally:
        await session.close()
    assert not any(all_containers(lab4).values()), all_containers(lab4)


async def test_two_services_on_two_plus_two_lab_nodes(lab4: Lab) -> None:
    """Two clusters side by side, each on two of the four nodes (launched from two
    inventories): both run, a stop with no cluster named names both and stops neither,
    the one named is stopped and the other still answers."""
    nodes = lab4.inventory_nodes()
    recipe = find_recipe("gpt-oss-120b-cluster")
    ids = []
    for half in (nodes[:2], nodes[2:]):
        session = Session(half)
        try:
            events = [
                e async for e in session.launch(recipe, {"tensor_parallel": "2"}, follow=False)
            ]
            assert not [e for e in events if isinstance(e, ev.Question)]
            assert session.cluster is not None and session.cluster.ready
            ids.append(session.cluster.cluster_id)
        finally:
            await session.close()
    first, second = ids
    every = Session(nodes)
    try:
        reports = {r.cluster.cluster_id: r for r in await every.status()}
        assert set(reports) == {first, second}
        assert {r.state for r in reports.values()} == {"ready"}
        with pytest.raises(InputError) as unnamed:
            [e async for e in every.stop()]
        assert f"--cluster {first}" in unnamed.value.remedy
        assert f"--cluster {second}" in unnamed.value.remedy
        stopped = [e async for e in every.stop(first) if isinstance(e, ev.Stopped)]
        assert stopped and stopped[0].left == [] and len(stopped[0].removed) == 2
        assert {r.cluster.cluster_id for r in await every.status()} == {second}
        smoke = [e async for e in every.smoke() if isinstance(e, ev.SmokeDone)]
        assert smoke and smoke[0].ok, [(r.name, r.ok, r.detail) for r in smoke[0].results]
        [e async for e in every.stop(second)]
    finally:
        await every.close()
    assert not any(all_containers(lab4).values()), all_containers(lab4)

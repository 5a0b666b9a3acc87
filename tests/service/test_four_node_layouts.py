"""TP 4, TP 2 x PP 2, TP 2 x DP 2 and DP 4 on four simulated Sparks (real SSH, the simulated
Docker API and engine), through the product's Session as the CLI and the cockpit drive it:
each layout launches, reaches ready with every rank's log streamed and classified, passes
the smoke checks, serves from every data-parallel replica, and stops with nothing left.
One cluster for the module, the layouts one after the other on it."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
import pytest_asyncio
from ops_helpers import FAKE_API_KEY

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.service.ssh_nodes import SshNodes
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base

pytestmark = pytest.mark.asyncio(loop_scope="module")

RECIPE = "gpt-oss-120b-cluster"


@dataclass(frozen=True)
class Layout:
    """A layout, the settings that ask for it, and what each rank's own log must say."""

    name: str
    sets: dict[str, str]
    tp: int
    pp: int
    dp: int
    # rank -> a line vLLM writes only on that rank under this layout
    rank_says: dict[int, str]


LAYOUTS = [
    Layout(
        "tp4",
        {},
        4,
        1,
        1,
        {r: f"rank {r} in world size 4 is assigned as DP rank 0, PP rank 0" for r in range(4)},
    ),
    Layout(
        "tp2xpp2",
        {"tensor_parallel": "2", "pipeline_parallel": "2"},
        2,
        2,
        1,
        {
            0: "rank 0 in world size 4 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0",
            3: "rank 3 in world size 4 is assigned as DP rank 0, PP rank 1, PCP rank 0, TP rank 1",
        },
    ),
    Layout(
        "tp2xdp2",
        {"tensor_parallel": "2", "data_parallel": "2"},
        2,
        1,
        2,
        {0: "Started DP Coordinator process", 2: "DP group leader: node_rank=2,"},
    ),
    Layout(
        "dp4",
        {"tensor_parallel": "1", "data_parallel": "4"},
        1,
        1,
        4,
        {0: "Started DP Coordinator process", **{r: f"(EngineCore_DP{r} pid=" for r in (1, 2, 3)}},
    ),
]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def session() -> AsyncIterator[Session]:
    scenario = Scenario(
        nodes=4, ssh_port=0, base_address=random_loopback_base(4), pace=0.02, token_scale=0.02
    )
    async with SimCluster(scenario) as sim:
        s = Session(nodes=SshNodes(list(sim.inventory)))
        try:
            yield s
        finally:
            await s.close()


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


async def served_by_engine(base_url: str, model: str, requests: int) -> dict[str, float]:
    """Send `requests` chats one after the other; the successes per engine in /metrics."""
    root = base_url.removesuffix("/v1")
    headers = {"Authorization": f"Bearer {FAKE_API_KEY}"}
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        for _ in range(requests):
            (await http.post(f"{root}/v1/chat/completions", json=body)).raise_for_status()
        text = (await http.get(f"{root}/metrics")).text
    served: dict[str, float] = {}
    for m in re.finditer(r'^vllm:request_success_total\{engine="(\d+)"[^}]*\} (\S+)$', text, re.M):
        served[m.group(1)] = served.get(m.group(1), 0.0) + float(m.group(2))
    return served


@pytest.mark.parametrize("layout", LAYOUTS, ids=[lay.name for lay in LAYOUTS])
async def test_layout_launches_serves_and_stops(session: Session, layout: Layout) -> None:
    recipe = find_recipe(RECIPE)
    events: list[object] = []
    async for e in session.launch(recipe, layout.sets, follow=False):
        assert not isinstance(e, ev.Question), f"{layout.name}: asked {e.kind}: {e.text}"
        events.append(e)
    assert any(isinstance(e, ev.ClusterReady) for e in events), layout.name

    # Each rank runs the layout asked for, on its own node.
    running = await session.running()
    assert running is not None
    assert [r.node for r in running.ranks] == [n.name for n in session.inventory]
    for r in running.ranks:
        assert flag(r.command, "--tensor-parallel-size") == str(layout.tp), r.command
        assert flag(r.command, "--pipeline-parallel-size") == str(layout.pp), r.command
        assert flag(r.command, "--data-parallel-size") == str(layout.dp), r.command
        assert ("--headless" in r.command) == (r.rank > 0), r.command

    # Every rank went through loading to ready, its log streamed and classified.
    for rank in range(4):
        states = [e.state for e in events if isinstance(e, ev.RankStateChanged) and e.rank == rank]
        assert ev.RankState.LOADING in states and states[-1] is ev.RankState.READY, (rank, states)
        lines = [e for e in events if isinstance(e, ev.LogLine) and e.rank == rank]
        kinds = Counter(line.kind for line in lines)
        assert kinds["progress"] > 0 and kinds["phase"] > 0, (layout.name, rank, kinds)
        if rank in layout.rank_says:
            assert any(layout.rank_says[rank] in line.text for line in lines), (
                layout.name,
                rank,
                layout.rank_says[rank],
            )
    head_ready = [e for e in events if isinstance(e, ev.LogLine) and e.kind == "ready"]
    assert head_ready and all(e.rank == 0 for e in head_ready)

    smoke = [e async for e in session.smoke() if isinstance(e, ev.SmokeDone)]
    assert smoke and smoke[0].ok, [(r.name, r.ok, r.detail) for r in smoke[0].results]

    if layout.dp > 1:
        # The head's API hands requests to every replica's engine, the headless ones too.
        served = await served_by_engine(smoke[0].base_url, recipe.model, 2 * layout.dp)
        assert sorted(served) == [str(i) for i in range(layout.dp)], served
        assert all(n > 0 for n in served.values()), served

    stopped = [e async for e in session.stop() if isinstance(e, ev.Stopped)]
    assert stopped and stopped[0].left == []
    assert sorted(node for node, _ in stopped[0].removed) == [n.name for n in session.inventory]
    assert await session.running() is None

"""Two services side by side in the cockpit: on four simulated Sparks, one cluster on the
first two and one on the last two (launched beforehand, as from two shells). The cockpit
follows one, says in its title line which and that another runs (`n` shows the next), and
`s` stops the one chosen: the other goes on serving and the cockpit follows it."""

from __future__ import annotations

from collections.abc import Sequence

from cockpit_helpers import screen_lines, static_text, wait_until

from spark_tui.core.inventory import InventoryNode
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.service.ssh_nodes import SshNodes
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base
from spark_tui.ui.app import SparkApp

RECIPE = "glm-5.3-flash"


async def _launched(nodes: Sequence[InventoryNode]) -> str:
    """A cluster of the recipe on `nodes`, ready; its id."""
    session = Session(nodes=SshNodes(list(nodes)))
    try:
        async for event in session.launch(find_recipe(RECIPE), {}, follow=False):
            assert not isinstance(event, ev.Question), event.text
        assert session.cluster is not None and session.cluster.ready
        return session.cluster.cluster_id
    finally:
        await session.close()


async def _running(nodes: Sequence[InventoryNode]) -> dict[str, list[str]]:
    """Our running clusters on `nodes`: id -> nodes."""
    session = Session(nodes=SshNodes(list(nodes)))
    try:
        await session.connect()
        return {c.cluster_id: c.nodes for c in await session.nodes.status() if c.running}
    finally:
        await session.close()


async def _smoke_passes(nodes: Sequence[InventoryNode]) -> bool:
    """The smoke checks pass against the only cluster of ours on `nodes`."""
    session = Session(nodes=SshNodes(list(nodes)))
    try:
        done = [e async for e in session.smoke() if isinstance(e, ev.SmokeDone)]
        return bool(done) and done[0].ok
    finally:
        await session.close()


def _title(app: SparkApp) -> str:
    return static_text(app, "#title")


async def test_two_clusters_are_shown_and_s_stops_the_chosen_one() -> None:
    scenario = Scenario(
        nodes=4, ssh_port=0, base_address=random_loopback_base(4), pace=0.02, token_scale=0.02
    )
    async with SimCluster(scenario) as sim:
        inventory = list(sim.inventory)
        first = await _launched(inventory[:2])
        second = await _launched(inventory[2:])
        names = {first: [n.name for n in inventory[:2]], second: [n.name for n in inventory[2:]]}
        assert await _running(inventory) == names

        session = Session(nodes=SshNodes(inventory))
        app = SparkApp(session, recipe=RECIPE, auto_refresh=False, handle_signals=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: app.cluster is not None, 30, "the attach")
            # The first by id is followed; the title says so and that another runs.
            chosen = min(names)
            other = max(names)
            assert app.cluster is not None and app.cluster.cluster_id == chosen
            await wait_until(pilot, lambda: "1/2" in _title(app), 10, "the clusters line")
            # At 80 columns too: the node list gives way, the cluster line stays whole.
            await pilot.pause(0.1)
            top = screen_lines(app)[0]
            assert top.endswith(f"cluster {chosen} 1/2 · n next"), top
            assert sorted(app.panes) == [0, 1]
            assert [p.node for p in app.panes.values()] == names[chosen]

            # n: the other one, its panes on its own nodes.
            await pilot.press("n")
            await wait_until(
                pilot,
                lambda: app.cluster is not None and app.cluster.cluster_id == other,
                30,
                "the switch",
            )
            await wait_until(pilot, lambda: f"cluster {other} 2/2" in _title(app), 10, "title")
            assert [p.node for p in app.panes.values()] == names[other]
            # Its tunnel to its own local port, as `status` gives it (the API's port plus
            # its head's place in the inventory): both can be open.
            await wait_until(
                pilot,
                lambda: app.main.bar.endpoint and app.main.bar.endpoint.cluster_id == other,
                10,
                "its endpoint",
            )
            local = 8000 + [n.name for n in inventory].index(names[other][0])
            assert app.main.bar.endpoint.tunnel.startswith(f"ssh -N -L {local}:127.0.0.1:8000 ")
            await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 30, "its ready")

            # s stops the chosen one only.
            await pilot.press("s")
            await pilot.pause(0.1)
            await pilot.press("y")
            await wait_until(
                pilot,
                lambda: app.cluster is not None and app.cluster.cluster_id == chosen,
                60,
                "the stop, then the other followed",
            )
            assert await _running(inventory) == {chosen: names[chosen]}
            assert await _smoke_passes(inventory)
            await wait_until(pilot, lambda: "1/2" not in _title(app), 10, "one cluster left")
            assert "n next" not in _title(app)

            # Leaving it running: quit asks, and "leave" keeps it.
            app.session.keep_on_cancel = True
            app.exit()
        await session.close()
        assert await _running(inventory) == {chosen: names[chosen]}

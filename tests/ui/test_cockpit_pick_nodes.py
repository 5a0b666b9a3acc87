"""Picking the nodes of a launch in the cockpit's nodes panel (↑↓ and space; the first
picked is the head), on three simulated Sparks at 80x24: the panel, the fit panel and the
status say which nodes run it, and the launch runs there, leaving the third alone."""

from __future__ import annotations

from cockpit_helpers import live_children, static_text, wait_until, wait_until_gone

from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession
from spark_tui.ui.screens.dialogs import Dialog
from spark_tui.ui.widgets.nodes import NodePanel
from spark_tui.ui.widgets.results import ResultsBar


def _containers(backend: DemoSession) -> dict[str, list[str]]:
    """The running containers on each simulated node, by node name."""
    return {
        node.name: [" ".join(c.argv) for c in node.engine.containers.values() if c.running]
        for node in backend.sim.nodes
    }


async def test_a_subset_picked_in_the_nodes_panel_is_where_the_launch_runs() -> None:
    before = live_children()
    backend = DemoSession(nodes=3, pace=0.05, token_scale=0.05, base_address=random_loopback_base())
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        panel = app.screen.query_one(NodePanel)
        assert "on 2/3" in static_text(app, "#fit-body")  # TP 2: the first two of three
        panel.focus()
        await pilot.pause(0.05)
        # The third node first (the head), then the first one.
        await pilot.press("down", "down", "space", "up", "up", "space")
        await pilot.pause(0.1)
        assert backend.on == ["sim-spark-3", "sim-spark-1"]
        lines = static_text(app, "#nodes").splitlines()
        # Narrow, three nodes, one line each: a picked node's mark is its place.
        assert lines[0].startswith("2 sim-spark-1"), lines
        assert lines[1].startswith("· sim-spark-2"), lines
        assert lines[2].startswith("1 sim-spark-3"), lines
        assert panel.border_subtitle == "2/3 picked", panel.border_subtitle
        status = str(app.screen.query_one(ResultsBar).status)
        assert "next launch on sim-spark-3, sim-spark-1 (sim-spark-3 the head)" in status, status
        fit = static_text(app, "#fit-body")
        assert "on 2/3" in fit, fit
        # The log panes show the ranks to be, the head's first.
        assert [pane.node for _rank, pane in sorted(app.panes.items())] == [
            "sim-spark-3",
            "sim-spark-1",
        ]

        await pilot.press("l")
        await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 60, "ready")
        assert app.cluster.ranks == [(0, "sim-spark-3"), (1, "sim-spark-1")]
        running = _containers(backend)
        assert len(running["sim-spark-3"]) == 1 and len(running["sim-spark-1"]) == 1, running
        assert running["sim-spark-2"] == [], running
        assert "--headless" not in running["sim-spark-3"][0]  # the head serves the API
        endpoint = app.screen.query_one(ResultsBar).endpoint
        assert endpoint is not None and endpoint.head == "sim-spark-3"

        # Taking both out again: no pick, the first nodes it needs.
        panel.focus()
        await pilot.pause(0.05)
        await pilot.press("space", "down", "down", "space")
        await pilot.pause(0.1)
        assert backend.on is None and panel.picked == []
        assert "no node picked" in str(app.screen.query_one(ResultsBar).status)

        await pilot.press("s")
        await pilot.pause(0.05)
        assert isinstance(app.screen, Dialog)
        await pilot.press("y")
        await wait_until(pilot, lambda: app.cluster is None, 30, "stopped")
        # The stop probes the nodes again: done before quitting.
        await wait_until(pilot, lambda: not any(w.is_running for w in app.workers), 30, "probe")
        assert _containers(backend) == {
            n: [] for n in ("sim-spark-1", "sim-spark-2", "sim-spark-3")
        }
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "exit")
    await wait_until_gone(before)

"""The cockpit with four and eight ranks, at 160x48 and at 80x24: a tab per rank that all
fit the width and say each rank's state, the failed rank brought forward, the gauges'
memory for every node (the replayed launch of cockpit_replay, its worker's events on
every worker rank)."""

from __future__ import annotations

import pytest
from cockpit_helpers import settle, static_text, wait_until
from snapshot_states import MANY, discovered, make_app
from textual.pilot import Pilot
from textual.widgets import TabbedContent, Tabs

from spark_tui.ui.app import SparkApp
from spark_tui.ui.widgets.gauges import GaugesPanel
from spark_tui.ui.widgets.nodes import NodePanel
from spark_tui.ui.widgets.results import ResultsBar

SIZES = [(160, 48), (80, 24)]


async def launch(pilot: Pilot[int], ranks: int) -> None:
    await discovered(pilot)
    if ranks != 4:  # the recipe's default is TP 4
        await pilot.press("e", *"tensor_parallel", "enter", str(ranks), "enter")
        await settle(pilot)
    await pilot.press("l")


def tab_labels(app: SparkApp) -> list[str]:
    tabs = app.query_one(TabbedContent)
    return [str(tabs.get_tab(f"tab-{r}").label) for r in range(tabs.tab_count)]


def assert_every_tab_shown(app: SparkApp, ranks: int) -> None:
    tabs = app.query_one(Tabs)
    shown = [t for t in tabs.query("Tab") if t.region.width > 0]
    assert len(shown) == ranks
    assert all(t.region.right <= app.size.width for t in shown), [t.region for t in shown]


@pytest.mark.parametrize("size", SIZES, ids=["160x48", "80x24"])
@pytest.mark.parametrize(("ranks", "failing"), [(4, 2), (8, 5)], ids=["4ranks", "8ranks"])
async def test_the_failed_rank_is_brought_forward(
    size: tuple[int, int], ranks: int, failing: int
) -> None:
    app = make_app(MANY, sparks=ranks, scenario="failed_launch", failing_rank=failing)
    async with app.run_test(size=size) as pilot:
        await launch(pilot, ranks)
        await wait_until(
            pilot, lambda: app.cluster is not None and app.cluster.failed, 10, "the failure"
        )
        await wait_until(pilot, lambda: app.busy is None, 10, "the launch to end")
        await settle(pilot)
        assert sorted(app.panes) == list(range(ranks))
        assert app.query_one(TabbedContent).active == f"tab-{failing}"
        pane = app.panes[failing]
        assert pane.state == "failed" and pane.region.height > 0
        labels = tab_labels(app)
        assert labels[failing].endswith("✗"), labels
        # The head went down after the worker: not the one brought forward.
        assert labels[0].endswith("✗"), labels
        assert_every_tab_shown(app, ranks)
        # The status names the worker that failed first.
        status = str(app.screen.query_one(ResultsBar).status)
        assert f"rank {failing} on sim-spark-{failing + 1}" in status, status


@pytest.mark.parametrize("size", SIZES, ids=["160x48", "80x24"])
@pytest.mark.parametrize("ranks", [4, 8], ids=["4ranks", "8ranks"])
async def test_every_rank_ready_and_every_nodes_memory(size: tuple[int, int], ranks: int) -> None:
    app = make_app(MANY, sparks=ranks)
    async with app.run_test(size=size) as pilot:
        await launch(pilot, ranks)
        await wait_until(pilot, lambda: app.cluster is not None and app.cluster.ready, 10, "ready")
        gauges = app.query_one(GaugesPanel)
        await wait_until(pilot, lambda: len(gauges.view.memory) == ranks, 10, "every node's memory")
        await settle(pilot)
        assert all(label.endswith("✓") for label in tab_labels(app)), tab_labels(app)
        assert_every_tab_shown(app, ranks)
        assert all(p.state == "ready" for p in app.panes.values())
        # Every node's free memory, each on screen (none cut off at the edge).
        lines = str(gauges.render_body()).splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("mem"))
        rows = [lines[first], *(ln for ln in lines[first + 1 :] if ln.startswith("   "))]
        memory = "\n".join(rows)
        assert memory.count("/120") == ranks, memory
        width = gauges.content_region.width
        assert all(len(row) <= width for row in rows), (rows, width)
        if size[0] >= 120:
            assert all(f"sim-spark-{i + 1} " in memory for i in range(ranks)), memory
        # The nodes panel names every node; narrow, one line each, so four fit its rows
        # (eight scroll).
        panel = app.query_one(NodePanel)
        listed = static_text(app, "#nodes")
        assert all(f"sim-spark-{i + 1}" in listed for i in range(ranks)), listed
        if ranks == 4:
            assert len(listed.strip().splitlines()) <= panel.content_region.height, listed

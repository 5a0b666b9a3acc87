"""The cockpit's verdicts and figures follow the nodes and the running cluster as they are:
after a stop, after re-attaching, in the nodes panel next to the gauges, and when a launch
would replace the running cluster (the service's question, not a refusal). On the recorded
demo launch (ReplaySession)."""

from __future__ import annotations

import dataclasses
import re

from cockpit_helpers import plain, settle, static_text, wait_until
from cockpit_replay import ReplayNodes, ReplaySession
from replay_app import launched_ready, replay_app
from textual.widgets import OptionList

from spark_tui.core.facts import NodeFacts
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service.evaluate import evaluate
from spark_tui.ui.app import SparkApp
from spark_tui.ui.screens.dialogs import Dialog

SIZE = (160, 48)
RECIPE = "glm-5.3-flash"
GIB = 1024**3


def row_verdict(app: SparkApp, name: str) -> str:
    olist = app.query_one("#recipe-list", OptionList)
    rows = [plain(olist.get_option_at_index(i).prompt) for i in range(olist.option_count)]
    (row,) = [r for r in rows if name in r]
    return row


class HeldMemory(ReplayNodes):
    """The nodes' memory as a probe finds it: 21 GiB free while the recorded cluster runs."""

    async def probe(self) -> list[NodeFacts]:
        nodes = await super().probe()
        if self.launched is None:
            return nodes
        return [dataclasses.replace(n, memory_available_bytes=21 * GIB) for n in nodes]


async def test_after_a_stop_the_verdicts_follow_the_freed_memory_at_once() -> None:
    backend = ReplaySession(HeldMemory())
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, app.discovered.is_set, 10, "discovery")
        # The list's verdicts are evaluated after the discovery: a row has none for a moment.
        await wait_until(
            pilot, lambda: not row_verdict(app, RECIPE).startswith(RECIPE), 10, "the verdict"
        )
        before = row_verdict(app, RECIPE)
        assert before.startswith("fits"), before
        await launched_ready(pilot)
        probes = backend.nodes.calls.count("probe")
        await pilot.press("r")  # a probe while it runs: its memory is in use, and ours
        await wait_until(pilot, lambda: backend.nodes.calls.count("probe") > probes, 5, "probe")
        await settle(pilot)
        assert row_verdict(app, RECIPE) == before
        await pilot.press("s")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.cluster is None, 5, "stopped")
        await settle(pilot)
        # No wait for the next periodic probe: the nodes were probed again after the stop.
        assert backend.nodes.calls[-1] == "probe", backend.nodes.calls
        assert row_verdict(app, RECIPE) == before
        assert static_text(app, "#fit-body").lstrip().startswith("fits")


async def test_after_reattaching_the_fit_uses_the_running_settings() -> None:
    backend = ReplaySession()
    nodes = [NodeFacts.from_dict(n) for n in backend_nodes(backend)]
    # A cluster launched elsewhere (no launch record here) with max_num_seqs=8.
    backend.nodes.launched = evaluate(find_recipe(RECIPE), {"max_num_seqs": "8"}, nodes).plan
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, app.discovered.is_set, 10, "discovery")
        await wait_until(pilot, lambda: app.cluster is not None, 5, "attached")
        await settle(pilot)
        details = static_text(app, "#recipe-details")
        assert re.search(r"max_num_seqs=8\b", details), details
        recipe = find_recipe(RECIPE)
        assert app.main.evaluate(recipe).settings["max_num_seqs"] == 8


def backend_nodes(backend: ReplaySession) -> list[dict[str, object]]:
    from cockpit_replay import recording

    return list(recording()["nodes"])


async def test_the_nodes_panel_and_the_gauges_show_the_same_free_memory() -> None:
    app = replay_app(ReplaySession())
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        await wait_until(
            pilot, lambda: "GiB free" in static_text(app, "#gauges"), 5, "memory sampled"
        )
        gauges = static_text(app, "#gauges")
        nodes = static_text(app, "#nodes")
        # The watch sampled 21 GiB free on each node: both panels say so.
        assert "sim-spark-1 21/" in gauges and "sim-spark-2 21/" in gauges, gauges
        assert nodes.count("(21 free)") == 2, nodes


async def test_a_launch_while_ours_runs_asks_to_replace_it() -> None:
    backend = ReplaySession()
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        first = app.cluster.cluster_id
        # Kept: the running cluster is followed again, nothing stopped.
        await pilot.press("l")
        await wait_until(pilot, lambda: isinstance(app.screen, Dialog), 5, "the question")
        assert "Stop it and launch" in str(app.screen.query_one("#yes").label)
        await pilot.press("n")
        await wait_until(
            pilot, lambda: "attach " + first in backend.nodes.calls, 5, "followed again"
        )
        assert backend.nodes.stopped == [] and app.cluster.cluster_id == first
        # Replaced: stopped, then launched.
        await pilot.press("l")
        await wait_until(pilot, lambda: isinstance(app.screen, Dialog), 5, "the question")
        await pilot.press("y")

        def relaunched() -> bool:
            launches = sum(c.startswith("launch") for c in backend.nodes.calls)
            return launches == 2 and bool(app.cluster and app.cluster.ready)

        await wait_until(pilot, relaunched, 10, "relaunched")
        # The service stopped the running cluster (on the nodes it needs) before it launched.
        assert backend.nodes.stopped == [first]
        calls = backend.nodes.calls
        last_launch = max(i for i, c in enumerate(calls) if c.startswith("launch"))
        assert calls.index(f"stop {first}") < last_launch, calls


async def test_the_recipe_list_says_the_nodes_the_plan_takes_as_recipes_does() -> None:
    # gpt-oss-120b-cluster allows 1 to 8 nodes; its own command plans 4 ranks.
    from spark_tui.commands.recipes import recipe_row

    name = "gpt-oss-120b-cluster"
    cli_nodes = recipe_row(find_recipe(name))["nodes"]
    assert cli_nodes == 4
    backend = ReplaySession(ReplayNodes())
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, app.discovered.is_set, 10, "discovery")
        await settle(pilot)
        # (the figure after the x is the recipe's memory per node)
        row = row_verdict(app, name)
        assert re.search(rf"\s{cli_nodes}x", row), row
        assert "1-8x" not in row

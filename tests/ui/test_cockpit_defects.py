"""Things a user met in the cockpit, each held by a test: stale containers are asked about,
every way to quit asks first, key hints follow the keymap, failed runs are in the history,
the API endpoint is shown with a tunnel that works, an invalid filter says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cockpit_helpers import results_text, settle, wait_until
from cockpit_replay import ReplayNodes, ReplaySession
from replay_app import replay_app

from spark_tui.core.errors import OperationFailed
from spark_tui.core.plan import LaunchPlan
from spark_tui.ops.events import ClusterEvent, Emit
from spark_tui.ops.launch import StaleContainer
from spark_tui.ui.config import CockpitConfig
from spark_tui.ui.screens.dialogs import Dialog, QuitDialog
from spark_tui.ui.screens.info import HistoryScreen

SIZE = (160, 48)


async def ready(pilot: Any) -> None:
    app = pilot.app
    await wait_until(pilot, app.discovered.is_set, 10, "discovery")
    await pilot.press("l")
    await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 10, "ready")
    await settle(pilot)


class StaleReplay(ReplayNodes):
    """Containers of an earlier run of ours hold the ranks' names (as ops.launch finds)."""

    async def launch(
        self, plan: LaunchPlan, replace_stale: Any, *, emit: Emit[ClusterEvent], **kw: Any
    ) -> None:
        stale = [StaleContainer("sim-spark-1", plan.ranks[0].container.name, "exited", "x", True)]
        if not await replace_stale(stale):
            raise OperationFailed(
                "launch cancelled: the earlier containers were kept", "stop them first"
            )
        self.calls.append("stale removed")
        await super().launch(plan, replace_stale, emit=emit, **kw)


async def test_stale_containers_of_ours_are_asked_about_and_can_be_replaced() -> None:
    session = ReplaySession(StaleReplay())
    app = replay_app(session)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, app.discovered.is_set, 10, "discovery")
        await pilot.press("l")
        await wait_until(pilot, lambda: isinstance(app.screen, Dialog), 5, "the question")
        assert "earlier spark-tui run" in str(app.screen.body)
        await settle(pilot)
        await pilot.press("n")
        await wait_until(pilot, lambda: "containers were kept" in results_text(app), 5, "kept")
        assert "stale removed" not in session.nodes.calls
        await pilot.press("l")
        await wait_until(pilot, lambda: isinstance(app.screen, Dialog), 5, "asked again")
        await settle(pilot)
        await pilot.press("y")
        await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 10, "ready")
        assert "stale removed" in session.nodes.calls


async def test_the_palette_quit_and_ctrl_q_ask_what_to_do_with_a_running_cluster() -> None:
    app = replay_app(ReplaySession(simulated=False))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await app.run_action("quit")  # what the palette's built-in "Quit" runs
        await pilot.pause(0.05)
        assert isinstance(app.screen, QuitDialog) and app.is_running
        await pilot.press("c")
        await pilot.pause(0.05)
        await pilot.press("ctrl+q")
        await pilot.pause(0.05)
        assert isinstance(app.screen, QuitDialog) and app.is_running
        await pilot.press("c")


async def test_key_hints_name_the_remapped_keys() -> None:
    config = CockpitConfig(keys={"smoke": "f6", "stop": "f9"})
    app = replay_app(config=config)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        text = results_text(app)
        assert "f6 smoke" in text and "f9 stop" in text, text
        assert "t smoke" not in text


async def test_failed_launches_are_in_the_history() -> None:
    app = replay_app(ReplaySession(scenario="failed_launch"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, app.discovered.is_set, 10, "discovery")
        await pilot.press("l")
        await wait_until(pilot, lambda: app.cluster and app.cluster.failed, 10, "failure")
        await wait_until(pilot, lambda: app.busy is None, 10, "settled")
        await pilot.press("h")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HistoryScreen)
        rows = app.screen.runs
        assert [(r["kind"], r["outcome"]) for r in rows] == [("launch", "FAILED")]
        run = app.session.history.get_run(rows[0]["id"])
        assert run.image_digests and run.ok is False  # as the CLI records them
        # Why it failed and each rank's last lines are kept, and the listing says where.
        assert run.failure and run.failure in rows[0]["summary"]
        assert run.rank_logs and rows[0]["logs"]
        for kept in run.rank_logs:
            assert Path(kept.path).read_text().strip(), kept
        detail = app.screen.describe(rows[0]["id"]).plain
        assert f"failed: {run.failure}" in detail and run.rank_logs[0].path in detail


async def test_the_api_endpoint_is_shown_with_a_tunnel_from_the_inventory() -> None:
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        text = results_text(app)
        assert "API http://127.0.0.11:8000/v1" in text
        assert "ssh -N -L 8000:127.0.0.1:8000 -p 2222 nvidia@127.0.0.11" in text
        # launched from the cockpit, recorded like the CLI's launches
        launch = app.session.history.list_runs("launch")[-1]
        assert launch.image_digests and launch.ok is True


async def test_an_invalid_filter_regex_says_so() -> None:
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.panes[0].query_one("RankLog").focus()
        await pilot.press("slash", *"loading[")
        await pilot.pause(0.1)
        box = app.query_one("#filter")
        assert box.has_class("-invalid") and "not a regular expression" in str(box.tooltip)
        assert "not a regex" in app.panes[0]._head_text().plain
        await pilot.press("backspace")
        await pilot.pause(0.1)
        assert not box.has_class("-invalid")

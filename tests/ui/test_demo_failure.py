"""A failing launch on the simulated Sparks: the worker's engine dies after ready."""

from __future__ import annotations

from cockpit_helpers import live_children, results_text, static_text, wait_until, wait_until_gone

from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession


async def test_a_dying_worker_is_shown_with_its_lines_and_the_other_rank_is_stopped() -> None:
    before = live_children()
    backend = DemoSession(
        pace=0.05, token_scale=0.05, base_address=random_loopback_base(), worker_dies_after=0.3
    )
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        await pilot.press("l")
        await wait_until(pilot, lambda: app.cluster and app.cluster.failed, 90, "the failure")
        await wait_until(pilot, lambda: app.busy is None, 30, "the launch to end")
        worker = app.panes[1]
        # The worker's last line is shown with its failure, or (seen once in a full CI run,
        # not reproduced since) only in its log below, when the failure was explained
        # before the line was read: the user sees it either way.
        await wait_until(
            pilot,
            lambda: any("exits now" in line for line in [*worker.explaining, *worker.lines]),
            30,
            "the worker's last line",
        )
        assert worker.explaining
        assert worker.state == "failed" and worker.has_class("failed")
        why = static_text(app, "#why-1")
        assert "rank 1 on sim-spark-2 failed" in why
        # the head saw its peer go and was stopped with it; nothing of the cluster runs
        assert app.panes[0].state in ("failed", "stopped")
        assert app.panes[0].explaining or app.panes[0].state == "stopped"
        assert "rank 1 on sim-spark-2" in results_text(app)
        assert not [
            c.name for n in backend.sim.nodes for c in n.engine.containers.values() if c.running
        ]
        assert await backend.running() is None
        # the failed cluster holds nothing: quitting does not ask
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "exit")
    assert backend.sim is None
    await wait_until_gone(before)

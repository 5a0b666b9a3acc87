"""A rank that fails after ready in the cockpit: as headless `watch` does, every rank is
stopped and its last lines kept in the history (said so), unless failed ranks are kept for
inspection (`keep_failed: true` in the config file, `k` toggles), and then `s` removes them. On the
demo's simulated Sparks, whose worker's engine dies shortly after ready."""

from __future__ import annotations

from cockpit_helpers import live_children, plain, results_text, wait_until, wait_until_gone

from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.config import CockpitConfig
from spark_tui.ui.demo_session import DemoSession
from spark_tui.ui.screens.info import HelpScreen

SIZE = (160, 48)


def _containers(backend: DemoSession) -> list[str]:
    """The containers on the simulated nodes (running or ended, not removed)."""
    return [name for n in backend.sim.nodes for name in n.engine.containers]


async def _fail(backend: DemoSession, app: SparkApp, pilot: object, *keys: str) -> None:
    await wait_until(pilot, app.discovered.is_set, 30, "discovery")
    await pilot.press(*keys, "l")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: app.cluster and app.cluster.failed, 20, "the failure")
    await wait_until(pilot, lambda: app.busy is None, 30, "the launch to end")
    await pilot.pause(0.3)  # type: ignore[attr-defined]


async def test_a_failure_stops_every_rank_and_says_their_lines_are_in_the_history() -> None:
    before = live_children()
    backend = DemoSession(
        pace=0.05, token_scale=0.05, base_address=random_loopback_base(), worker_dies_after=0.3
    )
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    said: list[str] = []
    shown = app.notify

    def notify(message: str, **kw: object) -> None:  # every toast, however long it stays
        said.append(str(message))
        shown(message, **kw)  # type: ignore[arg-type]

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await _fail(backend, app, pilot)
        assert app.cluster is not None and not app.cluster.running
        assert _containers(backend) == [], "every rank was removed"
        run = backend.history.launch_of(app.cluster.cluster_id)
        assert run is not None and run.ok is False
        assert (
            f"every rank of cluster {run.cluster_id} was stopped and removed; their last log "
            "lines are kept in the history"
        ) in said, said
        assert {r.rank for r in run.rank_logs} == {0, 1}, run.rank_logs
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "exit")
    await wait_until_gone(before)


async def test_kept_failed_ranks_stay_for_inspection_and_s_removes_them() -> None:
    before = live_children()
    backend = DemoSession(
        pace=0.05, token_scale=0.05, base_address=random_loopback_base(), worker_dies_after=0.3
    )
    app = SparkApp(
        backend,
        recipe="glm-5.3-flash",
        config=CockpitConfig(keep_failed=True),
        auto_refresh=False,
        handle_signals=False,
    )
    async with app.run_test(size=SIZE) as pilot:
        await _fail(backend, app, pilot)
        assert app.main.keep_failed
        assert app.cluster is not None and app.cluster.running, "its ranks are kept"
        kept = _containers(backend)
        assert len(kept) == 2, kept
        said = results_text(app)
        assert "kept for inspection" in said and "stop them (s)" in said, said
        await pilot.press("s")
        await pilot.pause(0.1)
        await pilot.press("y")
        # The stop has ended when the cockpit says so, not when the last container goes:
        # a q between the two rightly asks whether to stop the cluster.
        await wait_until(
            pilot,
            lambda: (
                not _containers(backend)
                and app.busy is None
                and (app.cluster is None or not app.cluster.running)
            ),
            30,
            "the stop",
        )
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "exit")
    await wait_until_gone(before)


async def test_the_config_file_keeps_failed_ranks_and_the_help_names_the_key() -> None:
    backend = DemoSession(pace=0.05, base_address=random_loopback_base())
    app = SparkApp(
        backend,
        config=CockpitConfig(keep_failed=True),
        auto_refresh=False,
        handle_signals=False,
    )
    async with app.run_test(size=SIZE) as pilot:
        assert app.main.keep_failed
        await pilot.press("k")
        assert not app.main.keep_failed
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        rows = dict(app.screen.rows)
        assert rows["k"] == "when a rank fails: keep or stop them", rows
        assert "keep_failed: true" in plain(app.screen.notes)
        await pilot.press("escape", "q")
        await wait_until(pilot, lambda: not app.is_running, 30, "exit")

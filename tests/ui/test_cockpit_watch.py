"""The watch after ready in the cockpit: the gauges panel, alerts, and long outages."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cockpit_helpers import (
    live_children,
    plain,
    results_text,
    static_text,
    wait_until,
    wait_until_gone,
)
from cockpit_replay import ReplaySession
from snapshot_states import ready

from spark_tui.ops.events import NodeUnreachable, WatchAlert
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession
from spark_tui.ui.screens.dialogs import Dialog, QuitDialog
from spark_tui.ui.widgets.gauges import GaugesPanel

SIZE = (140, 44)


def gauges_text(app: SparkApp) -> str:
    return plain(app.query_one(GaugesPanel).render_body())


def demo_app(backend: DemoSession) -> SparkApp:
    return SparkApp(
        backend,
        recipe="glm-5.3-flash",
        auto_refresh=False,
        handle_signals=False,
        watch_interval=0.5,
    )


async def test_gauges_show_numbers_after_ready_on_simulated_sparks() -> None:
    before = live_children()
    backend = DemoSession(pace=0.05, token_scale=0.05, base_address=random_loopback_base())
    app = demo_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        panel = app.query_one(GaugesPanel)
        assert not panel.display  # nothing is watched before ready
        await pilot.press("l")
        await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 60, "ready")

        def sampled() -> bool:
            view = panel.view
            return (
                view.gauges is not None
                and view.gauges.generation_tokens_per_s is not None
                and view.probe is not None
                and len(view.memory) == 2
            )

        await wait_until(pilot, sampled, 60, "the watch's samples")
        await pilot.pause(0.1)
        assert panel.display
        view = panel.view
        text = gauges_text(app)
        assert view.probe is not None and view.probe.ok, text
        gauges = view.gauges
        assert gauges is not None and gauges.running is not None
        assert f"running {gauges.running:.0f}" in text
        assert "KV cache " in text and "% " in text and "KV cache –" not in text
        assert " tok/s" in text and "– tok/s" not in text
        assert "probe " in text and " ms" in text
        for node in ("sim-spark-1", "sim-spark-2"):
            mem = view.memory[node]
            assert mem.total and mem.available
            assert f"{node} {mem.available / 1024**3:.0f}/{mem.total / 1024**3:.0f} GiB free" in (
                text
            )
        # the watch's own requests are folded in the head's pane, not shown
        head = app.panes[0]
        assert head.own_requests > 0
        assert not [line for line in head.lines if "POST /v1/chat/completions" in line]
        # keys still work while the watch samples: the help opens at once
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: app.screen is not app.main, 5, "the help")
        await pilot.press("escape")
        await pilot.press("s", "y")
        await wait_until(pilot, lambda: app.cluster is None, 30, "stopped")
        await pilot.pause(0.1)
        assert not panel.display  # a stopped cluster is not watched
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "exit")
    await wait_until_gone(before)


async def test_a_killed_worker_gives_an_alert_naming_its_rank_with_its_lines(
    tmp_path: Path,
) -> None:
    before = live_children()
    # The worker dies when the test says so, after the cockpit has seen the cluster ready
    # (a death timed from the rank's own ready could come before a busy cockpit saw it).
    die = tmp_path / "die"
    backend = DemoSession(
        pace=0.05,
        token_scale=0.05,
        base_address=random_loopback_base(),
        worker_dies_when=str(die),
    )
    app = demo_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        await pilot.press("l")
        await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 60, "ready")
        assert app.cluster.failed is False
        die.touch()
        panel = app.query_one(GaugesPanel)
        await wait_until(pilot, lambda: panel.view.alert is not None, 90, "the alert")
        # the launch's watch stops the other rank (the alert may come before that)
        await wait_until(pilot, lambda: app.cluster.failed and app.busy is None, 30, "the end")
        await pilot.pause(0.2)
        alert = panel.view.alert
        assert alert is not None
        assert (alert.rank, alert.node) == (1, "sim-spark-2")
        # its lines: from its own log, the last one saying it exits
        logged = app.panes[1].lines
        assert alert.lines and all(any(a.strip() in x for x in logged) for a in alert.lines)
        text = gauges_text(app)
        assert "rank 1 on sim-spark-2 failed" in text
        assert alert.lines[-1].strip()[:60] in text
        assert "every rank was stopped and removed" in text  # what is left, what to do
        assert panel.has_class("-alert")
        # the pane of the failed rank shows them too; the status line names the rank
        assert "exits now" in static_text(app, "#why-1")
        assert "SPARK_SIM_DIE_WHEN_PATH" in static_text(app, "#why-1")
        assert "rank 1 on sim-spark-2" in results_text(app)
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "exit")
    await wait_until_gone(before)


async def test_after_a_workers_death_the_heads_lines_are_shown_with_the_failed_rank() -> None:
    head_says = "RuntimeError: NCCL error: remote process exited or there was a network error"
    alert = WatchAlert(
        1,
        "sim-spark-2",
        "was killed (exit code 137)",
        ("[spark-tui simulated node failure] rank 1 exits now",),
        (head_says,),
        ("rank 0 on sim-spark-1 exited with code 1",),
    )
    backend = ReplaySession(watch_alert=alert)
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(
            pilot, lambda: app.query_one(GaugesPanel).view.alert is not None, 10, "alert"
        )
        await pilot.pause(0.1)
        text = gauges_text(app)
        assert "rank 1 on sim-spark-2 failed: was killed (exit code 137)" in text
        assert "rank 1 exits now" in text
        assert "the head says:" in text and "NCCL error" in text
        assert "then rank 0 on sim-spark-1 exited with code 1" in text
        why = static_text(app, "#why-1")
        assert "rank 1 exits now" in why and "the head says:" in why and "NCCL error" in why
        # the launch that follows the cluster settles its failure, not the watch: until it
        # does, the ranks are there, and the remedy says how to stop them
        assert f"stop them ({app.key_of('stop', 's')})" in text
        assert not backend.nodes.stopped


async def test_a_long_outage_is_a_state_and_the_user_decides_when_to_stop_watching() -> None:
    outages: asyncio.Queue[NodeUnreachable | None] = asyncio.Queue()
    backend = ReplaySession(outages=outages, simulated=False)
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)

    def outage(seconds: float, ask: bool) -> NodeUnreachable:
        return NodeUnreachable(
            "sim-spark-2",
            (1,),
            seconds,
            attempts=int(seconds),
            retry_in=5.0,
            reason="no answer within 10 s",
            remedy="check that sim-spark-2 is on and its sshd runs",
            ask=ask,
            _give_up=lambda: outages.put_nowait(None),
        )

    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        outages.put_nowait(outage(12.0, ask=False))
        await wait_until(
            pilot, lambda: "unreachable since 12 s" in static_text(app, "#nodes"), 10, "state"
        )
        nodes = static_text(app, "#nodes")
        assert "sim-spark-2" in nodes and "unreachable since 12 s, retrying" in nodes
        assert "unreachable 12 s, retrying" in plain(app.panes[1]._head_text())
        assert app.cluster is not None and app.cluster.running  # never torn down
        assert app.screen is app.main  # no question yet
        # past the give-up budget: asked, not decided alone
        outages.put_nowait(outage(120.0, ask=True))
        await wait_until(pilot, lambda: isinstance(app.screen, Dialog), 10, "the question")
        body = plain(app.screen.body)
        assert "has not answered for 120 s" in body and "left running" in body
        await pilot.press("n")  # keep waiting
        await wait_until(pilot, lambda: app.screen is app.main, 5, "the dialog to close")
        outages.put_nowait(outage(150.0, ask=True))
        await wait_until(
            pilot, lambda: "unreachable since 150 s" in static_text(app, "#nodes"), 10, "150 s"
        )
        await pilot.pause(0.1)
        assert app.screen is app.main  # not asked again so soon
        assert app.cluster is not None and app.cluster.running and not backend.nodes.stopped
        outages.put_nowait(outage(240.0, ask=True))
        await wait_until(pilot, lambda: isinstance(app.screen, Dialog), 10, "asked again")
        await pilot.press("y")  # stop watching
        await wait_until(
            pilot, lambda: app.busy is None and "gave up" in results_text(app), 10, "give-up"
        )
        text = results_text(app)
        assert "ranks were left as they are" in text and "→" in text
        assert not backend.nodes.stopped  # nothing was stopped for the outage
        # Not watched any more, but its ranks may run on: the cockpit has not forgotten it.
        assert app.cluster is not None and app.cluster.running
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, QuitDialog), 5, "quit asks")
        said: list[str] = []
        exit_app = app.exit

        def exit_saying(*args: Any, **kw: Any) -> None:
            said.append(str(kw.get("message")))
            exit_app(*args, **kw)

        app.exit = exit_saying  # type: ignore[method-assign]
        await pilot.press("l")  # leave it running
        await wait_until(pilot, lambda: not app.is_running, 10, "exit")
    assert not backend.nodes.stopped
    assert said and "left running" in said[0], said


async def test_the_watch_waits_while_the_benchmark_runs_then_resumes() -> None:
    backend = ReplaySession()
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        panel = app.query_one(GaugesPanel)
        await wait_until(pilot, lambda: panel.view.gauges is not None, 10, "the gauges")
        await pilot.press("b")
        await pilot.press("enter")  # the bench dialog: run with its settings
        await wait_until(pilot, lambda: app.last_bench is not None, 10, "the benchmark")
        await wait_until(pilot, lambda: panel.view.gauges is not None, 10, "the gauges again")
        watched = [c for c in backend.nodes.calls if c.startswith(("watch", "bench"))]
        cluster_id = app.cluster.cluster_id
        assert watched == [f"watch {cluster_id}", "bench", f"watch {cluster_id}"]
        assert panel.view.ended is None and "not watching" not in gauges_text(app)

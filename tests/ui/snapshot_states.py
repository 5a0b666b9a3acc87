"""The cockpit states the SVG snapshot tests take (test_snapshots_*.py): the real app, its
backend replaying a recorded demo launch (`cockpit_replay`), so no clock, pid, port or
temporary path reaches the picture."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cockpit_helpers import settle, wait_until
from cockpit_replay import ReplaySession
from textual.pilot import Pilot

from spark_tui.core.sweep import Objective, Target
from spark_tui.core.sweep_result import MEASURED, NOT_STARTED, SweepResult, SweepRow
from spark_tui.ops.events import ClusterEvent, RankState, RankStateChanged, WatchAlert
from spark_tui.ui.app import SparkApp


def make_app(recipe: str = "glm-5.3-flash", **backend_kw: object) -> SparkApp:
    return SparkApp(
        ReplaySession(**backend_kw),  # type: ignore[arg-type]
        recipe=recipe,
        auto_refresh=False,
        handle_signals=False,
    )


async def discovered(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await wait_until(pilot, app.discovered.is_set, 10, "discovery")
    await settle(pilot)


async def ready(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await discovered(pilot)
    await pilot.press("l")
    await wait_until(pilot, lambda: app.cluster is not None and app.cluster.ready, 10, "ready")
    await settle(pilot)


async def smoked(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await ready(pilot)
    await pilot.press("t")
    await wait_until(pilot, lambda: app.last_smoke is not None, 10, "smoke")
    await settle(pilot)


async def benched(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await smoked(pilot)
    await pilot.press("b")
    await pilot.press("enter")  # the bench dialog: run with its settings
    await wait_until(pilot, lambda: app.last_bench is not None, 10, "bench")
    await settle(pilot)


async def does_not_fit(pilot: Pilot[int]) -> None:
    await discovered(pilot)
    await pilot.press("down")  # gpt-oss-120b: one node only, two given
    await settle(pilot)


async def picked_nodes(pilot: Pilot[int]) -> None:
    """Two of four nodes picked in the nodes panel, the third one the head."""
    from spark_tui.ui.widgets.nodes import NodePanel

    await discovered(pilot)
    pilot.app.screen.query_one(NodePanel).focus()
    await pilot.press("down", "down", "space", "up", "space")
    await settle(pilot)


async def loading(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await discovered(pilot)
    await pilot.press("l")
    await wait_until(
        pilot,
        lambda: any(p.state == "loading" and (p.progress or 0) >= 0.5 for p in app.panes.values()),
        10,
        "loading",
    )
    await settle(pilot)


async def failed(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await discovered(pilot)
    await pilot.press("l")
    await wait_until(
        pilot,
        lambda: app.cluster is not None and app.cluster.failed and app.busy is None,
        10,
        "failure",
    )
    await settle(pilot)


async def edit_modal(pilot: Pilot[int]) -> None:
    await ready(pilot)
    await pilot.press("e", *"max_num_seqs", "enter", "8")
    await settle(pilot)


async def help_screen(pilot: Pilot[int]) -> None:
    await discovered(pilot)
    await pilot.press("question_mark")
    await settle(pilot)


async def watching(pilot: Pilot[int]) -> None:
    from spark_tui.ui.widgets.gauges import GaugesPanel

    app = pilot.app
    assert isinstance(app, SparkApp)
    await ready(pilot)
    await wait_until(
        pilot,
        lambda: (
            (g := app.query_one(GaugesPanel).view.gauges) is not None
            and g.generation_tokens_per_s is not None
        ),
        10,
        "the gauges",
    )
    await settle(pilot)


async def watch_alert(pilot: Pilot[int]) -> None:
    from spark_tui.ui.widgets.gauges import GaugesPanel

    app = pilot.app
    assert isinstance(app, SparkApp)
    await ready(pilot)
    await wait_until(pilot, lambda: app.query_one(GaugesPanel).view.alert is not None, 10, "alert")
    await settle(pilot)


async def eight_ranks_failed(pilot: Pilot[int]) -> None:
    """TP 8 on eight Sparks (set in the edit dialog before the launch), one worker killed:
    its tab is brought forward."""
    app = pilot.app
    assert isinstance(app, SparkApp)
    await discovered(pilot)
    await pilot.press("e", *"tensor_parallel", "enter", "8", "enter")
    await settle(pilot)
    await failed(pilot)


# Four and eight Sparks: the recipe made for them, the recorded worker's events on every
# worker rank (cockpit_replay.recorded_events).
MANY = "gpt-oss-120b-cluster"


def recorded_sweep() -> SweepResult:
    """A finished sweep with fixed figures (three values of max_num_seqs, one refused by
    vLLM, one failing its target), as the sweep's record holds it."""
    result = SweepResult(
        recipe="glm-5.3-flash",
        setting="max_num_seqs",
        raws=["2", "8192", "8"],
        values=[2, 8192, 8],
        targets=[Target.parse("ttft_p95<=1s@c8")],
        objective=Objective.parse("tok_s@c8"),
        overrides={},
        baseline_id="20261204T221500-b1a2b3c",
        baseline_value=4,
        done=True,
    )

    def levels(ttft: float, tps: float) -> dict[int, dict[str, float | None]]:
        return {8: {"ttft_p95_s": ttft, "total_output_tps": tps, "errors": 0.0}}

    result.rows = [
        SweepRow(
            2,
            "2",
            MEASURED,
            levels=levels(1.42, 31.6),
            delta_pct=-44.9,
            noise_pct=6.2,
            noise_verdict="worse",
        ),
        SweepRow(
            8192,
            "8192",
            NOT_STARTED,
            reason="rank 0 on sim-spark-1 exited (code 1): pydantic_core._pydantic_core."
            "ValidationError: 1 validation error for SchedulerConfig",
            remedy="read the rank's lines above; change the setting back",
            rank_lines={
                "rank 0 sim-spark-1": [
                    "pydantic_core._pydantic_core.ValidationError: 1 validation error for "
                    "SchedulerConfig",
                    "  Value error, max_num_batched_tokens (4096) must be greater than or "
                    "equal to max_num_seqs (8192).",
                ]
            },
        ),
        SweepRow(
            8,
            "8",
            MEASURED,
            levels=levels(0.61, 88.4),
            delta_pct=54.2,
            noise_pct=5.0,
            noise_verdict="better",
        ),
    ]
    return result


async def sweep_edit(pilot: Pilot[int]) -> None:
    await ready(pilot)
    await pilot.press("e", *"max_num_seqs", "enter", *"2,8192,8", "tab", *"ttft_p95<=1s@c8")
    await settle(pilot)


async def sweep_result(pilot: Pilot[int]) -> None:
    from spark_tui.ui.screens.sweep import SweepScreen

    await discovered(pilot)
    await pilot.app.push_screen(SweepScreen(recorded_sweep()))
    await settle(pilot)


async def sweep_chart(pilot: Pilot[int]) -> None:
    await sweep_result(pilot)
    await pilot.press("end")  # at 80x24 the chart is below the table
    await settle(pilot)


# A worker killed after ready, as the watch reports it (the head's lines with it).
WORKER_KILLED = WatchAlert(
    1,
    "sim-spark-2",
    "was killed (code 137: SIGKILL, from `docker kill` or the kernel's OOM killer)",
    ("[spark-tui simulated node failure] rank 1 exits now (SPARK_SIM_DIE_AFTER_READY_S=60)",),
    ("RuntimeError: NCCL error: remote process exited or there was a network error",),
)


def frozen_at_half_loaded(event: ClusterEvent) -> bool:
    return (
        isinstance(event, RankStateChanged)
        and event.state is RankState.LOADING
        and (event.progress or 0.0) >= 0.5
    )


STATES: dict[str, tuple[dict[str, object], Callable[[Pilot[int]], Awaitable[None]]]] = {
    "discovered": ({}, discovered),
    "does_not_fit": ({}, does_not_fit),
    "loading": ({"freeze_when": frozen_at_half_loaded}, loading),
    "ready_smoke": ({}, smoked),
    "bench": ({}, benched),
    "failed_rank": ({"scenario": "failed_launch"}, failed),
    "edit_modal": ({}, edit_modal),
    "help": ({}, help_screen),
    "watching": ({}, watching),
    "watch_alert": ({"watch_alert": WORKER_KILLED}, watch_alert),
    "four_ranks_watching": ({"recipe": MANY, "sparks": 4}, watching),
    "four_ranks_failed": (
        {"recipe": MANY, "sparks": 4, "scenario": "failed_launch", "failing_rank": 2},
        failed,
    ),
    "eight_ranks_failed": (
        {"recipe": MANY, "sparks": 8, "scenario": "failed_launch", "failing_rank": 5},
        eight_ranks_failed,
    ),
    "picked_nodes": ({"sparks": 4}, picked_nodes),
    "sweep_edit": ({}, sweep_edit),
    "sweep_result": ({}, sweep_result),
    "sweep_chart": ({}, sweep_chart),
}

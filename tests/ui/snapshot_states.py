"""The cockpit states the SVG snapshot tests take (test_snapshots_*.py): the real app, its
backend replaying a recorded demo launch (`cockpit_replay`), so no clock, pid, port or
temporary path reaches the picture."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cockpit_helpers import settle, wait_until
from cockpit_replay import ReplaySession
from textual.pilot import Pilot

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
}

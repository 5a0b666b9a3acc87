"""Launching and what follows it: the new cluster's panes, following its events for as long
as it runs (a launch, an attach, a relaunch), the watch after ready, and what the cockpit
says and does when a rank fails."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from rich.text import Text

from spark_tui.core.errors import SparkError
from spark_tui.service import events as ev
from spark_tui.ui import messages as msg
from spark_tui.ui.flows.guard import may_start
from spark_tui.ui.widgets.recipes import RecipePanel
from spark_tui.ui.workers import app_work

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.ui.screens.main import MainScreen


def launch(screen: MainScreen) -> None:
    """Launch the selected recipe with its settings, once its verdict allows it."""
    recipe = screen.selected
    # A running cluster of ours is the service's question (stop it and launch this
    # one?), asked once the launch has its verdict.
    if not may_start(screen, recipe) or recipe is None:
        return
    result = screen.evaluate(recipe)
    if result.problem or result.plan is None:
        problem = result.problem
        screen.show_error(
            problem.message if problem else "no launch plan",
            problem.remedy if problem else "fix the recipe or the settings",
        )
        return
    start(screen, recipe, screen.sets_of(recipe))


def new_cluster_panes(screen: MainScreen, ranks: list[tuple[int, str]]) -> None:
    """Fresh panes and panels for a cluster about to start (a launch, a relaunch)."""
    screen.ray_clear()
    screen.build_panes(ranks)
    screen.bar.clear_results()
    screen.gauges.clear()
    screen.link_panel.clear()
    screen.last_compare = None
    screen.last_compared = None


@app_work(group="follow")
async def start(screen: MainScreen, recipe: Recipe, sets: dict[str, str]) -> None:
    """Start the ranks and follow them for as long as they run (logs keep coming)."""
    running = screen.cluster if screen.cluster is not None and screen.cluster.running else None
    evaluation = screen.evaluate(recipe, sets)
    where = ""
    if evaluation.plan is not None:
        new_cluster_panes(screen, [(r.rank, r.node) for r in evaluation.plan.ranks])
        where = " on " + ", ".join(r.node for r in evaluation.plan.ranks)
    screen.busy = "launching"
    screen.show_status(f"launching {recipe.name}{where}…")
    await follow(screen, screen.session.launch(recipe, sets, keep_failed=screen.keep_failed))
    if running is not None and screen.cluster is running:
        # The user kept the running cluster (or the fit check refused the new one):
        # follow it again.
        await follow_running(screen)


async def follow_running(screen: MainScreen) -> None:
    """Follow the cluster of ours that runs on the nodes, if one does."""
    try:
        found = await screen.session.running()
    except SparkError:
        return
    if found is not None:
        screen.build_panes([(r.rank, r.node) for r in found.ranks])
        await follow(screen, screen.session.attach(found, keep_failed=screen.keep_failed))


async def follow(screen: MainScreen, events: AsyncIterator[ev.ServiceEvent]) -> None:
    """A cluster's events until they end; an error is shown with what to do next."""
    # What this follow is busy with: a follow replaced by the next action (a launch's
    # by a sweep's) ends after that action has said what it is busy with.
    busy = screen.busy
    try:
        await screen.consume(events)
    except SparkError as exc:
        cluster = screen.cluster
        # Its ranks kept for inspection: what to do next is the cockpit's keys.
        kept = cluster is not None and cluster.failed and cluster.running
        screen.show_error(exc.message, alert_remedy(screen) if kept else exc.remedy)
        screen.refresh_recipes(keep=screen.query_one(RecipePanel).selected_name)
    finally:
        if screen.busy == busy:
            screen.busy = None
        # Nothing follows the cluster any more (failed, or the user stopped watching).
        screen.workers.cancel_group(screen.app, "watch")
        for pane in screen.panes.values():
            pane.flush()


@app_work(group="follow")
async def attach(screen: MainScreen, found: Any) -> None:
    """Follow a cluster found running (discovery found it)."""
    await follow(screen, screen.session.attach(found, keep_failed=screen.keep_failed))


def rank_changed(screen: MainScreen, message: msg.RankChanged) -> None:
    """The status line's part of a rank's new state (its pane and tab show the rest)."""
    event = message.event
    if event.state == ev.RankState.FAILED:
        # The launch's watch owns this failure (it stops the other ranks): the watch
        # after ready, which would see them go, ends now.
        screen.workers.cancel_group(screen.app, "watch")
        # One toast per failure comes with the launch's error; the status says which rank.
        text = Text(
            f"rank {event.rank} on {event.node} {event.reason or 'failed'}", style="bold red"
        )
        text.append("  → the lines that explain it are at the top of its pane", style="")
        screen.show_status(text)


def cluster_up(screen: MainScreen, message: msg.ClusterUp) -> None:
    """The cluster is ready: say which keys come next, and watch it."""
    screen.busy = None if screen.busy == "launching" else screen.busy
    if screen.busy in ("sweep", "ending the sweep"):
        # A value relaunched: the sweep says where it is, and no watch's requests may
        # disturb the value's benchmark.
        return
    text = Text(f"cluster {message.event.cluster_id} ready ", style="bold green")
    hint = screen.keys_hint(
        ("smoke", "t", "smoke"),
        ("bench", "b", "bench"),
        ("edit", "e", "edit a setting"),
        ("stop", "s", "stop"),
    )
    text.append(f"({hint})", style="dim")
    screen.show_status(text)
    screen.refresh_recipes(keep=screen.query_one(RecipePanel).selected_name)
    watch(screen, message.event.cluster_id)


@app_work(group="watch")
async def watch(screen: MainScreen, cluster_id: str) -> None:
    """The watch after ready: its samples fill the gauges panel until the cluster is
    stopped, relaunched or fails (an alert names the rank and shows its lines)."""
    try:
        await screen.consume(
            screen.session.watch(
                cluster_id, interval=screen.watch_interval, keep_failed=screen.keep_failed
            )
        )
    except SparkError as exc:
        ended = msg.WatchEnded(f"{exc.message} → {exc.remedy}")
        screen.send(ended, screen.gauges, screen=False)


def watch_again(screen: MainScreen) -> None:
    """Watch the cluster again after a measurement paused the watch, if it still serves."""
    cluster = screen.cluster
    if cluster is not None and cluster.ready and cluster.running:
        watch(screen, cluster.cluster_id)


def alert_remedy(screen: MainScreen) -> str:
    """What to do after a rank failed: the ranks are kept, or were stopped."""
    cluster = screen.cluster
    if cluster is not None and cluster.running:
        return (
            "the ranks are kept for inspection: read their logs, stop them "
            f"({screen.key_of('stop', 's')}), fix the cause, then launch again "
            f"({screen.key_of('launch', 'l')})"
        )
    return (
        "every rank was stopped and removed, their last lines kept in the history "
        f"({screen.key_of('history', 'h')}); fix the cause the lines say, then launch "
        f"again ({screen.key_of('launch', 'l')})"
    )


def toggle_keep_failed(screen: MainScreen) -> None:
    """Toggle what happens to the ranks when one fails (kept, or stopped and removed)."""
    screen.keep_failed = not screen.keep_failed
    if screen.keep_failed:
        said = "when a rank fails, every rank is kept for inspection (you stop them)"
    else:
        said = "when a rank fails, every rank is stopped, its last lines kept in the history"
    running = screen.cluster is not None and screen.cluster.running
    later = " (from the next launch: the running one follows the setting it started with)"
    screen.notify(said + (later if running else ""), timeout=6)


def rank_alert(screen: MainScreen, message: msg.RankAlert) -> None:
    """A rank failed after ready: which rank, and what to do."""
    alert = message.alert
    # The gauges panel shows why (the lines); here which rank and what to do.
    text = Text(f"rank {alert.rank} on {alert.node} failed", style="bold red")
    text.append(f"  → {message.remedy}", style="")
    screen.show_status(text)

"""Tuning: the edit dialog (a setting, or values to sweep), a change remembered for the next
launch or tried on the running cluster (relaunched, measured, compared), and the results in
full."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from spark_tui.service import events as ev
from spark_tui.ui.flows.guard import may_start
from spark_tui.ui.flows.launch import follow, new_cluster_panes
from spark_tui.ui.workers import app_work

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.ui import messages as msg
    from spark_tui.ui.screens.edit import Change
    from spark_tui.ui.screens.main import MainScreen


def edit(screen: MainScreen) -> None:
    """The edit dialog for the running cluster's recipe, else the selected one."""
    from spark_tui.ui.views import editable_settings, preview_change

    cluster = screen.cluster
    recipe = screen.selected
    if cluster is not None and cluster.running:
        # The running cluster's recipe is the one being tuned.
        recipe = next((r for r in screen.recipes if r.name == cluster.recipe), recipe)
    if not may_start(screen, recipe, needs_nodes=False) or recipe is None:
        return
    sets = screen.sets_of(recipe)
    keys, current = editable_settings(recipe, sets)

    def preview(key: str, value: str) -> tuple[str | None, Text]:
        return preview_change(recipe, sets, key, value, screen.evaluate)

    def chosen(change: Change | None) -> None:
        if change is None:
            return
        if change.sweep:
            from spark_tui.ui.flows.sweep import start_sweep

            start_sweep(screen, recipe, change)
        else:
            apply_change(screen, recipe, (change.key, change.value))

    from spark_tui.ui.screens.edit import EditSettingDialog

    screen.app.push_screen(EditSettingDialog(keys, current, preview, recipe=recipe.name), chosen)


def apply_change(screen: MainScreen, recipe: Recipe, change: tuple[str, str]) -> None:
    """A setting for the next launch, or, on the recipe's ready cluster, tried at once."""
    key, value = change
    cluster = screen.cluster
    if not (cluster is not None and cluster.ready and cluster.recipe == recipe.name):
        # Nothing to compare against yet: remember the setting for the next launch.
        screen.sets[recipe.name] = {**screen.sets.get(recipe.name, {}), key: value}
        screen.refresh_recipes(keep=recipe.listed_name)
        screen.prepare_verdicts()
        screen.show_status(
            f"{key}={value} set for {recipe.name}; press {screen.key_of('launch', 'l')} to launch"
        )
        return
    before = screen.sets.get(recipe.name)
    screen.sets[recipe.name] = {**screen.sets_of(recipe), key: value}
    tune(screen, recipe, key, value, before)


@app_work(group="follow")
async def tune(
    screen: MainScreen, recipe: Recipe, key: str, value: str, before: dict[str, str] | None
) -> None:
    """One change: the service checks it, stops, relaunches, checks, measures and compares;
    the relaunched cluster is then followed like a launch. Not measured (refused, failed,
    ended with Esc): the settings before it are the recipe's again, and the cluster that
    runs (the one the change would have replaced, or the one the service brought back) is
    followed."""
    cluster = screen.cluster
    screen.workers.cancel_group(screen.app, "watch")  # the relaunched cluster gets its own
    if cluster is not None:
        new_cluster_panes(screen, list(cluster.ranks))
    screen.busy = "tuning"
    screen.tune_recipe, screen.tune_replaced = recipe, None
    screen.show_status(f"relaunching every rank with {key}={value}, then measuring… (Esc ends it)")
    try:
        await follow(
            screen, screen.session.tune(recipe, key, value, keep_failed=screen.keep_failed)
        )
    finally:
        screen.tune_recipe = None
        if screen.last_compared is None:
            _not_measured(screen, recipe, before)
    if screen.last_compared is None:
        await _follow_again(screen)


def _not_measured(screen: MainScreen, recipe: Recipe, before: dict[str, str] | None) -> None:
    """The change was not measured: the recipe's settings are the ones before it."""
    if before is None:
        screen.sets.pop(recipe.name, None)
    else:
        screen.sets[recipe.name] = before
    screen.refresh_recipes(keep=recipe.listed_name)
    screen.prepare_verdicts()


async def _follow_again(screen: MainScreen) -> None:
    """The cluster that runs after a change that was not measured, followed again."""
    from spark_tui.ui.flows.launch import follow_running

    cluster = screen.cluster
    if cluster is not None and cluster.ready and not cluster.followed:
        await follow_running(screen)


def tune_event(screen: MainScreen, event: ev.TuneReplaced | ev.TuneRestored) -> None:
    """The cluster a tune replaced (kept, for Esc to bring it back), and its return."""
    match event:
        case ev.TuneReplaced():
            screen.tune_replaced = event
        case ev.TuneRestored(cluster_id=cluster_id, change=change, reason=reason):
            screen.tune_replaced = None
            screen.show_status(
                Text(
                    f"{change} not kept ({reason}): cluster {cluster_id} runs the settings "
                    "it ran with before",
                    style="bold",
                )
            )


def end_tune(screen: MainScreen) -> None:
    """Esc while a tune relaunches: end it, bringing back the settings it replaced (or
    leaving the cluster it has not stopped yet running); or go on."""
    replaced, recipe = screen.tune_replaced, screen.tune_recipe
    cluster = screen.cluster
    if replaced is None or recipe is None:
        name = cluster.cluster_id if cluster is not None else "the cluster"
        body = f"The change is not measured yet and {name} still runs unchanged."
        yes = "End the tune"
    else:
        body = (
            f"Cluster {replaced.cluster_id} was stopped to relaunch it with {replaced.change}."
            "\nEnd the tune and relaunch the settings it ran with before?"
        )
        yes = "End, relaunch them"

    def chosen(yes: bool | None) -> None:
        if not yes or screen.busy != "tuning":
            return
        screen.workers.cancel_group(screen.app, "follow")
        if replaced is not None and recipe is not None:
            restore(screen, recipe, replaced)
        else:
            follow_cluster_again(screen)

    from spark_tui.ui.screens.dialogs import Dialog

    screen.app.push_screen(Dialog("End the tune?", body, yes=yes, no="Continue"), chosen)


@app_work(group="follow")
async def restore(screen: MainScreen, recipe: Recipe, replaced: ev.TuneReplaced) -> None:
    """The settings an ended tune replaced, relaunched (the service's restore)."""
    screen.busy = "ending the tune"
    screen.show_status(f"tune ended: relaunching the settings before {replaced.change}…")
    new_cluster_panes(screen, list(screen.cluster.ranks) if screen.cluster else [])
    await follow(screen, screen.session.restore_after_tune(recipe, replaced, "ended with Esc"))
    await _follow_again(screen)


@app_work(group="follow")
async def follow_cluster_again(screen: MainScreen) -> None:
    """A tune ended before it stopped anything: the cluster it would have replaced."""
    await _follow_again(screen)


def compared(screen: MainScreen, message: msg.TuneCompared) -> None:
    """The change measured: the comparison with the baseline, shortly and in full."""
    from spark_tui.ui.views import comparison_text

    screen.busy = None
    screen.last_compare = comparison_text(message.compared)
    screen.last_compared = message.compared
    change = message.compared.comparison.changed_text()
    full = screen.key_of("results", "v")
    screen.show_status(
        Text(
            f"relaunched ({change}): compared with the baseline below ({full} every figure)",
            style="bold",
        )
    )


def show_results(screen: MainScreen) -> None:
    """The last benchmark and comparison in full (a view that scrolls)."""
    from spark_tui.ui.screens.info import ResultsScreen
    from spark_tui.ui.views import bench_view

    screen.app.push_screen(ResultsScreen(bench_view(screen.last_bench, screen.last_compared)))

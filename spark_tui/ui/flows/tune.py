"""Tuning: the edit dialog (a setting, or values to sweep), a change remembered for the next
launch or tried on the running cluster (relaunched, measured, compared), and the results in
full."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

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
    screen.sets[recipe.name] = {**screen.sets_of(recipe), key: value}
    tune(screen, recipe, key, value)


@app_work(group="follow")
async def tune(screen: MainScreen, recipe: Recipe, key: str, value: str) -> None:
    """One change: the service stops, relaunches, checks, measures and compares; the
    relaunched cluster is then followed like a launch."""
    cluster = screen.cluster
    screen.workers.cancel_group(screen.app, "watch")  # the relaunched cluster gets its own
    if cluster is not None:
        new_cluster_panes(screen, list(cluster.ranks))
    screen.busy = "tuning"
    screen.show_status(f"relaunching every rank with {key}={value}, then measuring…")
    await follow(screen, screen.session.tune(recipe, key, value))


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

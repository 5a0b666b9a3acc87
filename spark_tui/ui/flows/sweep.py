"""Sweeps: each value of a setting in turn on the running cluster (the service's sweep), its
progress on the status line, its table and chart, and what to leave running when Esc ends
it early."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from spark_tui.service import events as ev
from spark_tui.ui.flows.launch import follow, new_cluster_panes, watch_again
from spark_tui.ui.screens.sweep import LeaveSweepDialog, SweepScreen
from spark_tui.ui.workers import app_work

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.core.sweep_result import SweepResult
    from spark_tui.ui.screens.edit import Change
    from spark_tui.ui.screens.main import MainScreen


def start_sweep(screen: MainScreen, recipe: Recipe, change: Change) -> None:
    """The edit dialog's values to sweep, on the recipe's ready cluster."""
    cluster = screen.cluster
    if not (cluster is not None and cluster.ready and cluster.recipe == recipe.name):
        screen.notify(
            f"a sweep measures a running {recipe.name}: launch it first "
            f"({screen.key_of('launch', 'l')})",
            severity="warning",
        )
        return
    from spark_tui.core.errors import InputError
    from spark_tui.core.sweep import Objective, Target

    try:
        targets = [Target.parse(t) for t in change.targets]
        objective = Objective.parse(change.objective) if change.objective else None
    except InputError as exc:
        screen.show_error(exc.message, exc.remedy)
        return
    sweep(screen, recipe, change.key, change.values, targets, objective)


@app_work(group="follow")
async def sweep(
    screen: MainScreen,
    recipe: Recipe,
    key: str,
    values: list[str],
    targets: list[Any],
    objective: Any,
) -> None:
    """Each value in turn (the service's sweep); the result opens when it is done. Esc
    while it runs asks what to leave running."""
    cluster = screen.cluster
    screen.workers.cancel_group(screen.app, "watch")
    if cluster is not None:
        new_cluster_panes(screen, list(cluster.ranks))
    screen.busy = "sweep"
    screen.sweep_recipe = recipe
    screen.last_sweep = None
    screen.show_status(f"sweep of {key}: {', '.join(values)} (Esc ends it)…")

    def keep(result: SweepResult) -> None:
        screen.last_sweep = result

    try:
        await follow(
            screen, screen.session.sweep(recipe, key, values, targets, objective, on_result=keep)
        )
        if screen.last_sweep is not None and screen.last_sweep.done:
            text = Text(f"sweep done: {screen.last_sweep.best_text()} ", style="bold")
            text.append(f"({screen.key_of('sweep', 'w')} shows its table)", style="dim")
            screen.show_status(text)
    finally:
        screen.busy = None
        watch_again(screen)


def sweep_event(screen: MainScreen, event: ev.SweepEvent) -> None:
    """A sweep's progress on the status line; a value done in its open table."""
    match event:
        case ev.SweepProgressed(done=done, total=total, value=value, phase=phase):
            eta = "" if event.eta_s is None else f" · about {event.eta_s / 60:.0f} min left"
            if event.eta_s is not None and event.eta_s < 120:
                eta = f" · about {event.eta_s:.0f} s left"
            what = "" if value is None else f" · {value}: {phase}"
            if value is None:
                what = f" · {phase}"
            screen.show_status(f"sweep {done}/{total} done{what}{eta} (Esc ends it)")
        case ev.SweepValueDone(result=result):
            screen.last_sweep = result
            if isinstance(screen.app.screen, SweepScreen):
                screen.app.screen.show(result)
        case ev.SweepDone(result=result):
            screen.last_sweep = result
            screen.show_status(Text(f"sweep done: {result.best_text()}", style="bold"))
            if isinstance(screen.app.screen, SweepScreen):
                screen.app.screen.show(result)
            else:
                screen.app.push_screen(SweepScreen(result))


def end_sweep(screen: MainScreen) -> None:
    """Esc while a sweep runs: what to leave running, or go on."""
    result, recipe = screen.last_sweep, screen.sweep_recipe
    if result is None or recipe is None:
        screen.notify("the sweep is measuring its baseline; Esc again once a value is done")
        return

    def chosen(choice: str | None) -> None:
        if choice and choice != "continue":
            screen.workers.cancel_group(screen.app, "follow")
            leave_sweep(screen, recipe, result, choice)

    screen.app.push_screen(LeaveSweepDialog(result), chosen)


@app_work(group="follow")
async def leave_sweep(screen: MainScreen, recipe: Recipe, result: SweepResult, choice: str) -> None:
    screen.busy = "ending the sweep"
    screen.show_status(f"sweep ended: leaving {choice} running…")
    result.interrupted = True
    await follow(screen, screen.session.leave_after_sweep(recipe, result, choice))
    screen.show_status(Text(f"sweep ended ({choice} left running)", style="bold"))
    screen.app.push_screen(SweepScreen(result))
    watch_again(screen)


def show_sweep_result(screen: MainScreen) -> None:
    """The last sweep's table and chart (also while it runs)."""
    if screen.last_sweep is None:
        screen.notify("no sweep yet: e, then values with commas (4,8,16)", severity="warning")
        return
    screen.app.push_screen(SweepScreen(screen.last_sweep))

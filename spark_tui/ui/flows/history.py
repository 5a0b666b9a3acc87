"""The run history: its list and each run's details, and forgetting a recipe's baseline."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui.core.errors import SparkError
from spark_tui.service.history import RunHistory

if TYPE_CHECKING:
    from spark_tui.ui.screens.main import MainScreen


def reset_baseline(screen: MainScreen) -> None:
    """Forget the picked baseline of the running recipe: the next change measures anew."""
    cluster = screen.cluster
    selected = screen.selected
    recipe = cluster.recipe if cluster else (selected.name if selected else None)
    if recipe is None:
        screen.notify("pick a recipe first", severity="warning")
        return
    gone = RunHistory(screen.session.history).reset_baseline(recipe)
    screen.notify(
        f"{recipe}: baseline reset ({', '.join(gone) or 'none was picked'}); the next "
        "change measures a new one first"
    )


def show_history(screen: MainScreen) -> None:
    """The runs so far, newest first; Enter shows one in full."""
    from spark_tui.ui.views import describe_run, history_rows

    history = RunHistory(screen.session.history)
    try:
        runs = history_rows(history)
    except SparkError as exc:
        screen.show_error(exc.message, exc.remedy)
        return
    from spark_tui.ui.screens.info import HistoryScreen

    screen.app.push_screen(
        HistoryScreen(runs, lambda rid: describe_run(history, rid), history.pin_message)
    )

"""How the logs are looked at: the filter line (for the recipes or the logs, whichever has
the focus), one pane full screen, compact or full lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Footer

from spark_tui.ui.widgets.filterbox import FilterBox
from spark_tui.ui.widgets.recipes import RecipePanel

if TYPE_CHECKING:
    from spark_tui.ui.screens.main import MainScreen


def open_filter(screen: MainScreen) -> None:
    """The filter line for the recipes when they have the focus, else for the logs."""
    focused = screen.app.focused
    recipes = screen.query_one(RecipePanel)
    box = filter_box(screen)
    if focused is not None and recipes in focused.ancestors_with_self:
        box.show_for(
            "recipes",
            recipes.filter_text,
            recipes.set_filter,
            lambda: screen.query_one("#recipe-list"),
        )
        return
    first = next(iter(screen.panes.values()), None)
    box.show_for(
        "logs",
        first.filter_text if first else "",
        screen.rank_panes.set_filter,
        lambda: first.query_one("RankLog") if first and first.is_attached else None,
    )


def filter_box(screen: MainScreen) -> FilterBox:
    """The filter line, made on first use (the first frame does without it)."""
    found = screen.query(FilterBox)
    if found:
        return found.first()
    box = FilterBox(id="filter")
    screen.mount(box, before=screen.query_one(Footer))
    return box


def toggle_fullscreen(screen: MainScreen) -> None:
    """The focused rank's pane full screen, or back."""
    if screen.app.screen.maximized is not None:
        screen.app.screen.minimize()
        return
    pane = screen.rank_panes.current(screen.app.focused)
    if pane is not None:
        screen.app.screen.maximize(pane, container=False)
        pane.query_one("RankLog").focus()


def toggle_compact(screen: MainScreen) -> None:
    compact = screen.rank_panes.toggle_compact()
    screen.notify("log lines: " + ("compact" if compact else "full (with prefixes)"))

"""What every action on a recipe checks before it starts, said the same way from any key."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.ui.screens.main import MainScreen


def may_start(screen: MainScreen, recipe: Recipe | None, *, needs_nodes: bool = True) -> bool:
    """Whether an action on `recipe` may start now; if not, a warning says why and what to do
    (a recipe to pick, the action still running, the discovery not done)."""
    if recipe is None:
        screen.notify("pick a recipe first", severity="warning")
        return False
    if screen.busy:
        screen.notify(f"busy: {screen.busy}", severity="warning")
        return False
    if needs_nodes and not screen.nodes:
        screen.notify(
            "no reachable node yet: wait for discovery "
            f"({screen.key_of('refresh', 'r')} refreshes)",
            severity="warning",
        )
        return False
    return True

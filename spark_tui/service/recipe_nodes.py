"""How many Sparks a recipe runs on, said the same way by `recipes` and the cockpit's list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_tui.core.errors import SparkError
from spark_tui.core.recipe import Recipe


def nodes_needed(recipe: Recipe, settings: Mapping[str, Any] | None = None) -> int | None:
    """The nodes `plan` runs the recipe on with these settings (the recipe's own when
    None): TP x PP x DP of its serve command, one rank per Spark. None when its command
    cannot be rendered (another runtime, a broken template: `plan` says why)."""
    # Loaded on use: the cockpit's first frame lists recipes before anything is planned.
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.plan import nodes_needed as planned

    try:
        return planned(recipe, apply_overrides(recipe, {}) if settings is None else settings)
    except SparkError:
        return None


def nodes_label(recipe: Recipe, needed: int | None, unit: str = "") -> str:
    """The planned node count (`unit` after it, e.g. "x"), with the recipe's own bounds
    where the plan falls outside them; the bounds alone while nothing is planned."""
    low, high = recipe.min_nodes, recipe.max_nodes
    if needed is None:
        if high is None:
            return f"{low}+{unit}"
        return f"{low}{unit}" if high == low else f"{low}-{high}{unit}"
    # A layout outside the recipe's own bounds is planned, then refused by the fit check
    # (a solo recipe that writes `-tp 2`): say both.
    if needed < low:
        return f"{needed}{unit} (min {low})"
    if high is not None and needed > high:
        return f"{needed}{unit} (max {high})"
    return f"{needed}{unit}"

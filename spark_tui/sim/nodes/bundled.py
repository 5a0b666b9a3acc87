"""The bundled recipes a simulated node is provisioned for (their images and models)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from spark_tui.core.errors import RecipeError
from spark_tui.core.recipe import Recipe
from spark_tui.core.recipe_loader import RECIPE_SUFFIXES, bundled_recipes_dir, load_recipe_file


@lru_cache(maxsize=4)
def bundled_recipes(folder: Path | None = None) -> tuple[Recipe, ...]:
    """Every loadable bundled recipe (a broken one is the recipe tests' business)."""
    folder = folder or bundled_recipes_dir()
    if not folder.is_dir():
        return ()
    recipes = []
    for path in sorted(folder.iterdir()):
        if path.suffix not in RECIPE_SUFFIXES or not path.is_file():
            continue
        try:
            recipes.append(load_recipe_file(path, source="bundled"))
        except RecipeError:
            continue
    return tuple(recipes)

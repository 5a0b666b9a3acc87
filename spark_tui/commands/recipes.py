"""`spark-tui recipes [--json] [--update]`: list every recipe and where it comes from.

Sources, in the order that settles a name clash: the user's folder, the git registries of
spark-tui's config (cloned on first use, pulled with `--update`), sparkrun's registry
clones, the bundled recipes (see core.registry).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from spark_tui.core.errors import RecipeError
from spark_tui.core.recipe import Recipe, require_vllm
from spark_tui.core.recipe_loader import list_recipes, shadowed
from spark_tui.service.recipe_nodes import nodes_label, nodes_needed


def missing_facts(recipe: Recipe) -> list[str]:
    """The fit-check facts the recipe's metadata does not give (in spark-tui's or sparkrun's
    names), as the fit check names them."""
    from spark_tui.core.model_facts import facts_from_metadata, missing_for_fit

    return missing_for_fit(facts_from_metadata(recipe.model, recipe.metadata))


def recipe_row(recipe: Recipe, is_shadowed: bool = False) -> dict[str, Any]:
    """The JSON object `recipes --json` prints for one recipe."""
    return {
        "name": recipe.name,
        # What lookups take: `3x-spark-cluster/NAME` for a registry recipe in a sub-folder.
        "ref": recipe.listed_name,
        "sparkrun_name": recipe.sparkrun_name,
        "model": recipe.model,
        "runtime": recipe.runtime,
        "min_nodes": recipe.min_nodes,
        "max_nodes": recipe.max_nodes,
        # The nodes `plan` takes for the recipe's own layout (None: not a vLLM command).
        "nodes": nodes_needed(recipe),
        "container": recipe.container,
        "source": recipe.source,
        "registry": recipe.registry,
        "origin": recipe.origin,
        "path": recipe.path,
        "mods": list(recipe.mods),
        "mods_missing": [m.ref for m in recipe.missing],
        "refused": _refusal(recipe),
        "description": recipe.description,
        "shadowed": is_shadowed,
        "facts_missing": missing_facts(recipe),
    }


def _refusal(recipe: Recipe) -> str | None:
    try:
        require_vllm(recipe)
    except RecipeError as exc:
        return exc.message
    return None


def _facts_cell(missing: list[str]) -> str:
    # Keep the column narrow for 80-column terminals; --json lists every missing fact.
    if not missing:
        return "complete"
    if len(missing) <= 2:
        return "missing " + ", ".join(missing)
    return f"{len(missing)} missing"


# Wider than this, the model and runtime go on a line of their own under each recipe.
WIDTH = 80


def _table(rows: list[dict[str, Any]]) -> str:
    headers = ("NAME", "MODEL", "RUNTIME", "NODES", "SOURCE", "FACTS")
    lines: list[tuple[str, ...]] = [headers]
    for row in rows:
        facts = _facts_cell(row["facts_missing"])
        if row["refused"]:
            facts = f"refused: runtime {row['runtime']}"
        elif row["mods_missing"]:
            facts = "mod missing: " + ", ".join(row["mods_missing"])
        source = row["origin"] + (" (shadowed)" if row["shadowed"] else "")
        nodes = row["_nodes"]
        lines.append((row["ref"], row["model"], row["runtime"], nodes, source, facts))
    wide = _columns(lines)
    if max(len(line) for line in wide) <= WIDTH:
        return "\n".join(wide)
    narrow = _columns([(ref, nodes, src, facts) for ref, _m, _r, nodes, src, facts in lines])
    out = [narrow[0]]
    for line, (_ref, model, runtime, *_rest) in zip(narrow[1:], lines[1:], strict=True):
        out += [line, f"  {model}  {runtime}"]
    return "\n".join(out)


def _columns(lines: list[tuple[str, ...]]) -> list[str]:
    """Each line's cells in columns two spaces apart (the last one as long as it is)."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]) - 1)]
    out = []
    for line in lines:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(line[:-1])]
        out.append("  ".join([*cells, line[-1]]).rstrip())
    return out


def run(args: argparse.Namespace) -> int:
    """List recipes as a table, or as a JSON list with `--json`."""
    from spark_tui.service.recipes import sync_registries

    for result in sync_registries(update=getattr(args, "update", False)):
        if result.action == "failed":
            print(f"spark-tui: registry {result.name}: {result.detail}", file=sys.stderr)
        elif result.action != "present":
            print(f"spark-tui: registry {result.name} {result.action}", file=sys.stderr)
    errors: list[RecipeError] = []
    recipes = list_recipes(errors=errors)
    hidden = shadowed(recipes)
    rows = []
    for recipe in recipes:
        row = recipe_row(recipe, (recipe.listed_name, recipe.origin) in hidden)
        row["_nodes"] = nodes_label(recipe, row["nodes"])
        rows.append(row)
    if getattr(args, "json", False):
        print(json.dumps([{k: v for k, v in r.items() if k != "_nodes"} for r in rows], indent=2))
    else:
        print(_table(rows) if rows else "no recipes found")
    for exc in errors:
        print(f"spark-tui: skipped: {exc.message}", file=sys.stderr)
        print(f"  remedy: {exc.remedy}", file=sys.stderr)
    return 0

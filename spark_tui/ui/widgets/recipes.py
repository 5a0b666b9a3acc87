"""The recipe picker: bundled and user recipes with a fit badge each, filter, details."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe

BADGE = {
    "fits": ("fits", "green"),
    "fits_with_warnings": ("warn", "yellow"),
    "does_not_fit": ("no fit", "red"),
    "unknown": ("?", "magenta"),
}


@dataclass
class RecipeRow:
    """One recipe as listed: the recipe and its verdict on the current nodes."""

    recipe: Recipe
    verdict: str | None = None
    # The nodes its plan takes with the settings chosen here (None until the nodes are known).
    nodes: int | None = None


def option_text(row: RecipeRow) -> Text:
    # Loaded with the first recipe listed (after the first frame), as in details_text.
    from spark_tui.service.recipe_nodes import nodes_label

    # The listed name: a registry's sub-folder variant of a name shows its path.
    text = Text(row.recipe.listed_name, no_wrap=True, overflow="ellipsis")
    mem = row.recipe.metadata.get("memory_gb_per_node")
    text.append(f"  {nodes_label(row.recipe, row.nodes, 'x')}{mem or ''}", style="dim")
    if row.recipe.source == "user":
        text.append(" user", style="italic cyan")
    if row.verdict:
        label, style = BADGE.get(row.verdict, (row.verdict, ""))
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{label:<6} ", style=style)
        line.append_text(text)
        return line
    return text


def details_text(recipe: Recipe, settings: dict[str, object], nodes: int | None = None) -> Text:
    """Nodes needed and model, image, then the settings a user tunes."""
    from spark_tui.service.recipe_nodes import nodes_label

    one = nodes == 1 or (nodes is None and recipe.min_nodes == recipe.max_nodes == 1)
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(nodes_label(recipe, nodes, " node" if one else " nodes") + " ", style="cyan")
    text.append(recipe.model, style="bold")
    text.append(f"\n{recipe.container or '(no image)'}", style="dim")
    shown = ", ".join(f"{k}={v}" for k, v in list(settings.items())[:6])
    if shown:
        text.append(f"\n{shown}", style="dim")
    return text


class RecipePanel(Vertical):
    """Option list of recipes plus the selected one's details."""

    DEFAULT_CSS = """
    RecipePanel { border: round $panel-lighten-2; height: 1fr; }
    RecipePanel:focus-within { border: round $primary; }
    RecipePanel > OptionList, RecipePanel > OptionList:focus {
        height: 1fr; border: none; padding: 0; scrollbar-size-vertical: 1;
        text-wrap: nowrap; text-overflow: ellipsis; }
    RecipePanel > #recipe-details { height: auto; max-height: 3; padding: 0 1;
        text-wrap: nowrap; text-overflow: ellipsis; border-top: dashed $panel-lighten-2; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rows: list[RecipeRow] = []
        self.filter_text = ""

    def compose(self) -> ComposeResult:
        yield OptionList(id="recipe-list")
        yield Static("", id="recipe-details")

    def on_mount(self) -> None:
        self.border_title = "Recipes"

    def set_rows(self, rows: list[RecipeRow], keep: str | None = None) -> None:
        self.rows = rows
        self._rebuild(keep)

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self.border_subtitle = f"/{text}" if text else ""
        self._rebuild(self.selected_name)

    def visible(self) -> list[RecipeRow]:
        needle = self.filter_text.lower()
        return [
            r
            for r in self.rows
            if not needle
            or needle in r.recipe.listed_name.lower()
            or needle in r.recipe.model.lower()
        ]

    def _rebuild(self, keep: str | None) -> None:
        olist = self.query_one(OptionList)
        rows = self.visible()
        olist.clear_options()
        olist.add_options([Option(option_text(r), id=r.recipe.listed_name) for r in rows])
        names = [r.recipe.listed_name for r in rows]
        if rows:
            olist.highlighted = names.index(keep) if keep in names else 0

    @property
    def selected_name(self) -> str | None:
        olist = self.query_one(OptionList)
        if olist.highlighted is None:
            return None
        option = olist.get_option_at_index(olist.highlighted)
        return option.id

    def show_details(self, recipe: Recipe | None, settings: dict[str, object]) -> None:
        body = self.query_one("#recipe-details", Static)
        if recipe is None:
            body.update(Text("no recipe", style="dim"))
            return
        nodes = next((r.nodes for r in self.rows if r.recipe is recipe), None)
        body.update(details_text(recipe, settings, nodes))

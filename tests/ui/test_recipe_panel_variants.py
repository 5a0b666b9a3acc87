"""The recipe picker lists a registry's sub-folder variants of one name (eugr's
3x-spark-cluster/NAME beside NAME) as rows of their own, each selectable."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import OptionList

from spark_tui.core.recipe import Recipe
from spark_tui.ui.widgets.recipes import RecipePanel, RecipeRow


class PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RecipePanel()


async def test_variants_of_one_name_are_rows_of_their_own() -> None:
    flat = Recipe(name="qwen-big", model="m", command="vllm serve {model}", registry="eugr")
    wide = Recipe(
        name="qwen-big",
        model="m",
        command="vllm serve {model}",
        registry="eugr",
        ref="4x-spark-cluster/qwen-big",
        min_nodes=4,
        max_nodes=4,
    )
    app = PanelApp()
    async with app.run_test() as pilot:
        panel = app.query_one(RecipePanel)
        panel.set_rows([RecipeRow(flat), RecipeRow(wide)], keep="4x-spark-cluster/qwen-big")
        await pilot.pause()
        assert app.query_one(OptionList).option_count == 2
        assert panel.selected_name == "4x-spark-cluster/qwen-big"
        panel.set_filter("4x")
        await pilot.pause()
        assert [r.recipe.min_nodes for r in panel.visible()] == [4]

"""The demo cockpit: the app on a session of simulated Sparks, as `spark-tui demo` opens it
in a terminal and as each browser visitor of `spark-tui demo --web` gets it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui.ui.app import SparkApp
from spark_tui.ui.config import load_config
from spark_tui.ui.demo_session import DemoSession

if TYPE_CHECKING:
    from textual.driver import Driver

DEFAULT_RECIPE = "glm-5.3-flash"
# Four Sparks and more open on a recipe made for them (TP 4 by default; its layouts are
# settings), where the pair's recipe would leave all but two nodes out.
MANY_NODES_RECIPE = "gpt-oss-120b-cluster"
MANY_NODES = 4


def demo_app(
    *,
    nodes: int,
    memory_gb: int,
    recipe: str | None,
    theme: str | None,
    pace: float,
    token_scale: float,
    driver_class: type[Driver] | None = None,
    ring: bool = False,
) -> SparkApp:
    """The cockpit on `nodes` simulated Sparks it starts itself (and closes with the app);
    `ring`: cabled as a ring rather than a switch or a pair."""
    session = DemoSession(
        nodes=nodes, memory_gb=memory_gb, pace=pace, token_scale=token_scale, ring=ring
    )
    return SparkApp(
        session,
        recipe=recipe or (MANY_NODES_RECIPE if nodes >= MANY_NODES else DEFAULT_RECIPE),
        theme=theme,
        config=load_config(),
        driver_class=driver_class,
    )

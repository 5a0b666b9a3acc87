"""`spark-tui demo`: the cockpit on simulated Sparks (no GPU, no Docker, no root needed)."""

from __future__ import annotations

import argparse
import os

from spark_tui.core.errors import EXIT_OK, InputError


def open_demo(
    *,
    nodes: int = 2,
    memory_gb: int = 128,
    recipe: str | None = None,
    theme: str | None = None,
    pace: float | None = None,
) -> int:
    """Start simulated Sparks in this process and open the cockpit on them."""
    if nodes < 1:
        raise InputError(f"--nodes {nodes}: need at least one node", "pass --nodes 2")
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.config import load_config
    from spark_tui.ui.remote_backend import DemoBackend

    # A demo launch reaches ready in 10 to 30 s; SPARK_SIM_PACE speeds it up or slows it down.
    pace = pace if pace is not None else float(os.environ.get("SPARK_SIM_PACE", "0.5"))
    backend = DemoBackend(nodes=nodes, memory_gb=memory_gb, pace=pace)
    app = SparkApp(backend, recipe=recipe or "glm-5.3-flash", theme=theme, config=load_config())
    return int(app.run() or EXIT_OK)


def run(args: argparse.Namespace) -> int:
    return open_demo(
        nodes=args.nodes,
        memory_gb=args.memory_gb,
        recipe=args.demo_recipe or args.recipe,
        theme=args.demo_theme or args.theme,
    )

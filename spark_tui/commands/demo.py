"""`spark-tui demo`: the cockpit on simulated Sparks (no GPU, no Docker, no root needed)."""

from __future__ import annotations

import argparse
import os

from spark_tui.core.errors import InputError


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
    from spark_tui.ui.demo_session import DemoSession
    from spark_tui.ui.runner import run_cockpit

    # A demo launch reaches ready in 10 to 30 s; SPARK_SIM_PACE speeds it up or slows it down.
    # SPARK_SIM_TOKEN_SCALE does the same for generation speed (tests use both).
    pace = pace if pace is not None else _env_float("SPARK_SIM_PACE", 0.5)
    token_scale = _env_float("SPARK_SIM_TOKEN_SCALE", 1.0)
    session = DemoSession(nodes=nodes, memory_gb=memory_gb, pace=pace, token_scale=token_scale)
    app = SparkApp(session, recipe=recipe or "glm-5.3-flash", theme=theme, config=load_config())
    return run_cockpit(app)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{name}={raw!r} is not a number", f"set {name} to e.g. 0.5") from None
    if value <= 0:
        raise InputError(f"{name}={raw!r} must be positive", f"set {name} to e.g. 0.5")
    return value


def run(args: argparse.Namespace) -> int:
    return open_demo(
        nodes=args.nodes,
        memory_gb=args.memory_gb,
        recipe=args.demo_recipe or args.recipe,
        theme=args.demo_theme or args.theme,
    )

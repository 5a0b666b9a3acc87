"""`spark-tui demo`: the cockpit on simulated Sparks (no GPU, no Docker, no root needed)."""

from __future__ import annotations

import argparse
import os

from spark_tui.core.errors import InputError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_VISITORS = 2


def open_demo(
    *,
    nodes: int = 2,
    memory_gb: int = 128,
    recipe: str | None = None,
    theme: str | None = None,
    pace: float | None = None,
    ring: bool = False,
) -> int:
    """Start simulated Sparks in this process and open the cockpit on them."""
    check_layout(nodes, ring)
    from spark_tui.commands.tty import require_terminal

    require_terminal("spark-tui demo")
    from spark_tui.ui.demo_app import demo_app
    from spark_tui.ui.runner import run_cockpit

    app = demo_app(
        nodes=nodes,
        memory_gb=memory_gb,
        recipe=recipe,
        theme=theme,
        pace=pace if pace is not None else _pace(),
        token_scale=_token_scale(),
        ring=ring,
    )
    return run_cockpit(app)


def check_layout(nodes: int, ring: bool) -> None:
    """Refuse simulated Sparks that cannot be: no node, or a ring of fewer than three."""
    if nodes < 1:
        raise InputError(f"--nodes {nodes}: need at least one node", "pass --nodes 2")
    if ring and nodes < 3:
        raise InputError(
            f"--ring with --nodes {nodes}: a ring needs 3 or more Sparks (two are a direct pair)",
            "pass --nodes 3 or 4 with --ring, or leave --ring out",
        )


def serve_demo(
    *,
    nodes: int,
    memory_gb: int,
    recipe: str | None,
    theme: str | None,
    host: str,
    port: int,
    token: str | None,
    max_visitors: int,
    expose: bool,
    ring: bool = False,
) -> int:
    """Serve the demo cockpit to browsers (one app and its own simulated Sparks per tab),
    behind a token; only simulated Sparks, never the user's inventory, keys or history."""
    check_layout(nodes, ring)
    if not 0 <= port <= 65535:
        raise InputError(f"--port {port} is not a TCP port", "pass --port 8000 (0: any free one)")
    if max_visitors < 1:
        raise InputError(f"--max-visitors {max_visitors}: need at least 1", "pass --max-visitors 2")
    # Loaded here only: nothing of the web part is imported without --web.
    from spark_tui.ui.web.access import checked_token, is_loopback

    if not is_loopback(host) and not expose:
        raise InputError(
            f"--host {host} serves the demo to other machines: anyone with the link can drive "
            "a demo cockpit (simulated Sparks only) and use this machine's CPU",
            "add --expose-demo-to-network to mean it, or leave --host out (this machine only)",
        )
    try:
        from spark_tui.ui.web.options import DemoOptions
        from spark_tui.ui.web.server import serve
    except ImportError as exc:
        raise InputError(
            f"the web demo needs textual-serve ({exc.name or exc} is not installed)",
            "pip install 'spark-tui[web]' (or pip install textual-serve), then run it again",
        ) from None

    options = DemoOptions(
        nodes=nodes,
        memory_gb=memory_gb,
        recipe=recipe,
        theme=theme,
        pace=_pace(),
        token_scale=_token_scale(),
        ring=ring,
    )
    return serve(
        host=host,
        port=port,
        token=checked_token(token),
        options=options,
        max_visitors=max_visitors,
    )


def _pace() -> float:
    # A demo launch reaches ready in 10 to 30 s; SPARK_SIM_PACE speeds it up or slows it down.
    return _env_float("SPARK_SIM_PACE", 0.5)


def _token_scale() -> float:
    # The same for generation speed (tests use both).
    return _env_float("SPARK_SIM_TOKEN_SCALE", 1.0)


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
    if getattr(args, "web", False):
        return serve_demo(
            nodes=args.nodes,
            memory_gb=args.memory_gb,
            recipe=args.demo_recipe or args.recipe,
            theme=args.demo_theme or args.theme,
            host=args.host or DEFAULT_HOST,
            port=DEFAULT_PORT if args.port is None else args.port,
            token=args.token,
            max_visitors=DEFAULT_MAX_VISITORS if args.max_visitors is None else args.max_visitors,
            expose=args.expose_demo_to_network,
            ring=args.ring,
        )
    web_flags = (args.host, args.port, args.token, args.max_visitors)
    if any(v is not None for v in web_flags) or args.expose_demo_to_network:
        raise InputError(
            "--host, --port, --token, --max-visitors and --expose-demo-to-network are for the "
            "web demo",
            "add --web (spark-tui demo --web ...), or leave them out for the terminal demo",
        )
    return open_demo(
        nodes=args.nodes,
        memory_gb=args.memory_gb,
        recipe=args.demo_recipe or args.recipe,
        theme=args.demo_theme or args.theme,
        ring=args.ring,
    )

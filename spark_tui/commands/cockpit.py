"""`spark-tui [--inventory F | --hosts H1,H2] [--recipe NAME] [--theme NAME]`: the cockpit."""

from __future__ import annotations

import argparse
from pathlib import Path

from spark_tui.core.errors import InputError
from spark_tui.core.inventory import InventoryNode, hosts_to_inventory, parse_inventory


def inventory_nodes(inventory: str | None, hosts: str | None) -> tuple[list[InventoryNode], str]:
    """The nodes to open the cockpit on, and the CLI arguments that name them again."""
    import shlex

    if inventory:
        path = Path(inventory).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"cannot read the inventory {path}: {exc.strerror}",
                "pass an existing file: nodes: [{name, host, port, user, identity_file}]",
            ) from exc
        return parse_inventory(text, str(path)), f"--inventory {shlex.quote(str(path))}"
    if hosts:
        return hosts_to_inventory(hosts), f"--hosts {shlex.quote(hosts)}"
    raise InputError(
        "no nodes given",
        "run `spark-tui demo` to try it on simulated Sparks, or pass --inventory FILE or "
        "--hosts spark-a,spark-b, or set `inventory:` in the config file",
    )


def run(args: argparse.Namespace) -> int:
    from spark_tui.ui.config import load_config

    config = load_config()
    if args.demo:
        from spark_tui.commands.demo import open_demo

        return open_demo(nodes=2, memory_gb=128, recipe=args.recipe, theme=args.theme)
    nodes, target = inventory_nodes(args.inventory or config.inventory, args.hosts)
    from spark_tui.commands.terminal import require_terminal

    require_terminal("spark-tui")
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.remote_backend import RemoteBackend
    from spark_tui.ui.runner import run_cockpit

    backend = RemoteBackend(
        nodes, accept_new_host_keys=args.accept_new_host_keys, target_args=target
    )
    app = SparkApp(backend, recipe=args.recipe, theme=args.theme, config=config)
    return run_cockpit(app)

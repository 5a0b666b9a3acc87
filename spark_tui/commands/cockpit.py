"""`spark-tui [--inventory F | --hosts H1,H2] [--recipe NAME] [--theme NAME]`: the cockpit."""

from __future__ import annotations

import argparse

from spark_tui.core.errors import InputError
from spark_tui.service.targets import Targets, inventory_nodes


def run(args: argparse.Namespace) -> int:
    from spark_tui.ui.config import load_config

    config = load_config()
    if args.demo:
        from spark_tui.commands.demo import open_demo

        return open_demo(nodes=2, memory_gb=128, recipe=args.recipe, theme=args.theme)
    targets = Targets(
        inventory=args.inventory or config.inventory,
        hosts=args.hosts,
        accept_new_host_keys=args.accept_new_host_keys,
        hosts_file=getattr(args, "hosts_file", None),
        sparkrun_cluster=getattr(args, "sparkrun_cluster", None),
    )
    if not targets.given:
        raise InputError(
            "no nodes given",
            "run `spark-tui demo` to try it on simulated Sparks, or pass --inventory FILE or "
            "--hosts spark-a,spark-b, or set `inventory:` in the config file",
        )
    nodes, target = inventory_nodes(targets), targets.as_flags(live=True)
    from spark_tui.commands.tty import require_terminal

    require_terminal("spark-tui")
    from spark_tui.service.session import Session
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.runner import run_cockpit

    session = Session(
        nodes,
        accept_new_host_keys=targets.accept_new_host_keys,
        reattach_hint=f"`spark-tui {target}` (it re-attaches), or `spark-tui status {target}`",
    )
    session.where = target
    app = SparkApp(session, recipe=args.recipe, theme=args.theme, config=config)
    return run_cockpit(app)

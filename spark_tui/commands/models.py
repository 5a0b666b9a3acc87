"""`spark-tui models sync RECIPE (--inventory FILE | --hosts ...)`: the recipe's model and its
draft model on every node, downloaded once and copied node to node (spark_tui.ops.model_sync).

This command only renders the sync's events; the same events drive the cockpit.
Exit codes: 0 complete on every node; 1 a download or copy failed; 2 bad input; 3 a node
could not be reached.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.ops.events import Notice
from spark_tui.ops.sync_events import SyncDone, SyncEvent, SyncFinished, SyncProgress, SyncStep


def _where(args: argparse.Namespace) -> str:
    if getattr(args, "inventory", None):
        return f"--inventory {args.inventory}"
    if getattr(args, "hosts", None):
        return f"--hosts {args.hosts}"
    return "--inventory FILE"


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    m, s = divmod(int(seconds + 0.5), 60)
    return f"ETA {m}:{s:02d}"


def render(event: SyncEvent, out: TextIO, *, tty: bool = False) -> None:
    """One line per event (progress lines overwrite each other on a terminal)."""
    if isinstance(event, SyncProgress):
        total = f"/{event.total_bytes / 1e9:.2f}" if event.total_bytes else ""
        rate = f"{event.rate_bytes_per_s / 1e6:.0f} MB/s" if event.rate_bytes_per_s else "? MB/s"
        pct = f" {event.fraction:4.0%}" if event.fraction is not None else ""
        line = (
            f"  {event.node}: {event.action} {event.done_bytes / 1e9:.2f}{total} GB{pct}  "
            f"{rate}  {_eta(event.eta_seconds)}"
        )
        if tty:
            out.write("\r" + line.ljust(78))
            out.flush()
        return
    if tty:
        out.write("\n" if isinstance(event, SyncDone) else "")
    if isinstance(event, SyncStep):
        out.write(f"{event.node}: {event.message}\n")
    elif isinstance(event, SyncDone):
        what = f"{event.sent_bytes / 1e9:.2f} GB from {event.source}" if event.sent_bytes else ""
        skipped = f"{event.skipped} file(s) already complete"
        out.write(
            f"{event.node}: {event.item} complete ({', '.join(filter(None, [what, skipped]))})\n"
        )
    elif isinstance(event, Notice):
        out.write(f"{event.level}: {event.message}\n")
        if event.remedy:
            out.write(f"  remedy: {event.remedy}\n")
    elif isinstance(event, SyncFinished):
        if event.ok:
            out.write(f"complete on every node: {', '.join(event.items)}\n")
        else:
            out.write(f"not complete on: {', '.join(event.failed_nodes) or 'every node'}\n")
    out.flush()


async def _sync(args: argparse.Namespace) -> bool:
    from spark_tui.commands.terminal import targets
    from spark_tui.core.model_presence import model_needs
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.core.render import render_argv
    from spark_tui.ops.model_sync import ModelSync
    from spark_tui.remote.probe import probe_pool
    from spark_tui.remote.ssh import ConnectionPool
    from spark_tui.service.targets import inventory_nodes

    recipe = find_recipe(args.recipe)
    settings = apply_overrides(recipe, list(args.sets or []))
    needs = model_needs(recipe, render_argv(recipe, settings))
    t = targets(args)
    pool = ConnectionPool(inventory_nodes(t), accept_new_host_keys=t.accept_new_host_keys)
    tty = sys.stdout.isatty()
    ok = False
    try:
        await pool.open()
        facts = await probe_pool(pool, docker=False)
        run = ModelSync(pool, facts, args.recipe, env=dict(os.environ), where=_where(args))
        async for event in run.run(needs):
            render(event, sys.stdout, tty=tty)
            if isinstance(event, SyncFinished):
                ok = event.ok
    finally:
        await pool.close()
    return ok


def run(args: argparse.Namespace) -> int:
    if args.models_command == "sync":
        from spark_tui.commands._interrupts import run_command

        return EXIT_OK if run_command(lambda: _sync(args)) else EXIT_FAILED
    raise AssertionError(args.models_command)  # argparse allows no other action

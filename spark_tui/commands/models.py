"""`spark-tui models sync RECIPE (--inventory FILE | --hosts ...) [--json]`: the recipe's model
and its draft model on every node, downloaded once and copied node to node.

This command only renders the service's sync (`Session.sync_models`, `service.sync`); the
same events drive the cockpit. `render` and `finish` are shared with `images sync`.
Exit codes: 0 complete on every node; 1 a download or copy failed; 2 bad input; 3 a node
could not be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator
from typing import TextIO, assert_never

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.service.events import (
    Notice,
    Probed,
    Question,
    SyncDone,
    SyncEvent,
    SyncFinished,
    SyncProgress,
    SyncStarted,
    SyncStep,
)
from spark_tui.service.sync import IMAGE, SyncTally


def where_of(args: argparse.Namespace) -> str:
    """The flags that name the nodes (and the ones `--on` picks), for the remedies we
    print."""
    import shlex

    from spark_tui.commands.terminal import targets

    t = targets(args)
    where = t.as_flags(live=True)
    return f"{where} {shlex.join(['--on', t.on])}" if t.on else where


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    m, s = divmod(int(seconds + 0.5), 60)
    return f"ETA {m}:{s:02d}"


def progress_line(event: SyncProgress) -> str:
    """`NODE: copy 1.20/4.00 GB  30%  112 MB/s  ETA 0:25`."""
    total = f"/{event.total_bytes / 1e9:.2f}" if event.total_bytes else ""
    rate = f"{event.rate_bytes_per_s / 1e6:.0f} MB/s" if event.rate_bytes_per_s else "? MB/s"
    pct = f" {event.fraction:4.0%}" if event.fraction is not None else ""
    return (
        f"  {event.node}: {event.action} {event.done_bytes / 1e9:.2f}{total} GB{pct}  "
        f"{rate}  {_eta(event.eta_seconds)}"
    )


def render(event: SyncEvent, out: TextIO, tally: SyncTally, *, tty: bool = False) -> None:
    """One line per event (progress lines overwrite each other on a terminal); `tally` has
    already taken the event."""
    if isinstance(event, SyncProgress):
        if tty:
            out.write("\r" + progress_line(event).ljust(78))
            out.flush()
        return
    if tty:
        out.write("\n" if isinstance(event, SyncDone) else "")
    match event:
        case SyncStarted(kind=kind, recipe=recipe, items=items, nodes=nodes):
            what = "model" if kind != IMAGE else "image"
            out.write(f"syncing {recipe}'s {what} {', '.join(items)} on {', '.join(nodes)}\n")
        case SyncStep(node=node, message=message):
            out.write(f"{node}: {message}\n")
        case SyncDone():
            row = tally.row(event.node, event.item)
            if row.kind == IMAGE:
                out.write(f"{event.node}: {event.item}: {row.outcome}\n")
            else:
                sent = (
                    f"{event.sent_bytes / 1e9:.2f} GB from {event.source}"
                    if event.sent_bytes
                    else ""
                )
                skipped = f"{event.skipped} file(s) already complete"
                out.write(
                    f"{event.node}: {event.item} complete "
                    f"({', '.join(filter(None, [sent, skipped]))})\n"
                )
        case Notice(level=level, message=message, remedy=remedy):
            out.write(f"{level}: {message}\n")
            if remedy:
                out.write(f"  remedy: {remedy}\n")
        case SyncFinished(ok=True, items=items):
            out.write(f"complete on every node: {', '.join(items)}\n")
        case SyncFinished(failed_nodes=failed):
            out.write(f"not complete on: {', '.join(failed) or 'every node'}\n")
        case Probed() | Question():
            pass  # the nodes as probed are the tally's; a question is answered by show_sync
        case _:
            assert_never(event)
    out.flush()


def summary(tally: SyncTally, out: TextIO) -> None:
    """What was done on each node, one line per node and item."""
    out.write("per node:\n")
    for node, rows in tally.by_node().items():
        for row in rows:
            out.write(f"  {node}: {row.item}: {row.outcome}\n")
    out.flush()


async def show_sync(events: AsyncIterator[SyncEvent], as_json: bool) -> bool:
    """Print a sync's events (or, with `as_json`, one document at the end); True when ok."""
    from spark_tui.commands.terminal import answer

    tally = SyncTally()
    tty = sys.stdout.isatty() and not as_json
    async for event in events:
        if isinstance(event, Question):  # an unknown host key: asked on a terminal
            answer(event, {})
            continue
        if not tally.apply(event) or as_json:
            continue
        render(event, sys.stdout, tally, tty=tty)
    if as_json:
        print(json.dumps(tally.to_dict(), indent=2))
    else:
        summary(tally, sys.stdout)
    return tally.ok


async def _sync(args: argparse.Namespace) -> bool:
    from spark_tui.commands.terminal import session
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.service.evaluate import parse_sets

    recipe = find_recipe(args.recipe)
    overrides = parse_sets(list(args.sets or []))
    s = session(args)
    try:
        events = s.sync_models(recipe, overrides, where=where_of(args))
        return await show_sync(events, bool(getattr(args, "json", False)))
    finally:
        await s.close()


def run(args: argparse.Namespace) -> int:
    if args.models_command == "sync":
        from spark_tui.commands.interrupts import run_command

        return EXIT_OK if run_command(lambda: _sync(args)) else EXIT_FAILED
    raise AssertionError(args.models_command)  # argparse allows no other action

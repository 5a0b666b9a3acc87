"""`spark-tui stop (--inventory FILE | --hosts ...) [--cluster ID | --all]`: remove every
rank's container of one cluster of ours (the only one, or the one named: with several side
by side a bare stop names them and stops none) or of all of them on every node, then list again to confirm nothing
is left (exit 1 if something is)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from spark_tui.commands.terminal import err
from spark_tui.core.errors import EXIT_OK


async def _stop(args: argparse.Namespace) -> Any:
    from spark_tui.commands.terminal import consume, session
    from spark_tui.service.events import Stopped

    s = session(args)
    try:
        seen = await consume(s.stop(args.cluster, every=args.all), on_event=lambda _e: None)
    finally:
        await s.close()
    return next(e for e in seen if isinstance(e, Stopped))


def run(args: argparse.Namespace) -> int:
    from spark_tui.commands.interrupts import run_command

    done = run_command(lambda: _stop(args))
    removed = done.removed
    for node, name in removed:
        print(f"removed {name} on {node}")
    for node, name in done.killed:
        print(f"  {name} on {node} ignored SIGTERM: it was killed (SIGKILL)", file=sys.stderr)
    # A stop of one cluster leaves the others serving: say only what is true of this one.
    ours = f"of cluster {done.cluster_id} " if done.cluster_id else ""
    if not removed and ours:
        err(f"no spark-tui container {ours}on these nodes (`spark-tui status` lists ours)")
    elif not removed:
        print("no spark-tui containers on these nodes", file=sys.stderr)
    else:
        print(f"checked again: no spark-tui container {ours}is left", file=sys.stderr)
    return EXIT_OK

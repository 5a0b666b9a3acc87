"""`spark-tui stop (--inventory FILE | --hosts ...)`: remove every rank's container of our
clusters on every node, then list again to confirm nothing is left (exit 1 if something is)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from spark_tui.commands._interrupts import run_command
from spark_tui.core.errors import EXIT_OK


async def _stop(args: argparse.Namespace) -> Any:
    from spark_tui.ops.cluster import stop
    from spark_tui.remote.discovery import pool_from_args

    pool = pool_from_args(args)
    await pool.open()
    try:
        report = await stop(pool, getattr(args, "cluster", None))
    finally:
        await pool.close()
    return report


def run(args: argparse.Namespace) -> int:
    report = run_command(lambda: _stop(args))
    removed = report.removed
    for node, name in removed:
        print(f"removed {name} on {node}")
    for node, name in report.killed:
        print(f"  {name} on {node} ignored SIGTERM: it was killed (SIGKILL)", file=sys.stderr)
    if not removed:
        print("no spark-tui containers on these nodes", file=sys.stderr)
    else:
        print("checked again: no spark-tui container is left", file=sys.stderr)
    return EXIT_OK

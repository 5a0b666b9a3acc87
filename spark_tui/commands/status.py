"""`spark-tui status (--inventory FILE | --hosts ...) [--json]`: our clusters on the nodes,
found from container labels (cluster id, recipe, ranks, their states and nodes)."""

from __future__ import annotations

import argparse
import json
import sys

from spark_tui.commands._interrupts import run_command
from spark_tui.core.errors import EXIT_OK


async def _status(args: argparse.Namespace) -> list:  # type: ignore[type-arg]
    from spark_tui.ops.cluster import status
    from spark_tui.remote.discovery import pool_from_args

    pool = pool_from_args(args)
    await pool.open()
    try:
        return await status(pool)
    finally:
        await pool.close()


def run(args: argparse.Namespace) -> int:
    clusters = run_command(lambda: _status(args))
    if getattr(args, "json", False):
        print(json.dumps({"clusters": [c.to_dict() for c in clusters]}, indent=2))
        return EXIT_OK
    if not clusters:
        print("no spark-tui containers on these nodes", file=sys.stderr)
        return EXIT_OK
    for c in clusters:
        print(
            f"cluster {c.cluster_id}  {c.recipe or '?'}  {c.state}  "
            f"settings {c.settings_hash or '?'}  model {c.model or '?'}"
        )
        for r in c.ranks:
            print(f"  rank {r.rank}  {r.node:<16} {r.role or '?':<7} {r.container}  {r.status}")
    return EXIT_OK

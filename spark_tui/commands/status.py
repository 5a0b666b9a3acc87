"""`spark-tui status (--inventory FILE | --hosts ...) [--json]`: our clusters on the nodes,
found from container labels (cluster id, recipe, ranks, their states and nodes), each with
its API endpoint and the SSH tunnel command that reaches it from this machine."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from spark_tui.commands._interrupts import run_command
from spark_tui.core.errors import EXIT_OK


async def _status(args: argparse.Namespace) -> list[Any]:
    from spark_tui.commands.terminal import session

    s = session(args)
    try:
        return await s.status()
    finally:
        await s.close()


def run(args: argparse.Namespace) -> int:
    found = run_command(lambda: _status(args))
    if args.json:
        clusters = [{**c.to_dict(), "endpoint": asdict(e)} for c, e in found]
        print(json.dumps({"clusters": clusters}, indent=2))
        return EXIT_OK
    if not found:
        print("no spark-tui containers on these nodes", file=sys.stderr)
        return EXIT_OK
    for c, endpoint in found:
        print(
            f"cluster {c.cluster_id}  {c.recipe or '?'}  {c.state}  "
            f"settings {c.settings_hash or '?'}  model {c.model or '?'}"
        )
        for r in c.ranks:
            print(f"  rank {r.rank}  {r.node:<16} {r.role or '?':<7} {r.container}  {r.status}")
        print(f"  API     {endpoint.api_url}  (on {endpoint.head})")
        print(f"  tunnel  {endpoint.tunnel}")
        print(f"          then http://127.0.0.1:{endpoint.api_url.rsplit(':', 1)[-1]}")
    return EXIT_OK

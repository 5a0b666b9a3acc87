"""`spark-tui logs (--inventory FILE | --hosts ...) [--rank R] [--follow] [--tail N]`: the
ranks' logs, each line prefixed with its rank and node. `--follow` keeps reading (across
dropped connections of any length, without losing or repeating a line) until every
container ends, Ctrl+C, SIGTERM or SIGHUP (which close every connection before exiting)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from spark_tui.commands._interrupts import run_command
from spark_tui.core.errors import EXIT_OK, InputError, NoClusterError, SparkError


def _prefix(rank: int, node: str) -> str:
    return f"[{rank} {node}]"


async def _logs(args: argparse.Namespace) -> int:
    from spark_tui.commands.terminal import session
    from spark_tui.ops.attach import pick_cluster
    from spark_tui.ops.cluster import close_dockers, open_dockers, status
    from spark_tui.ops.logs import RankLogFollower

    s = session(args)
    await s.connect()
    pool = s.pool
    dockers = {}
    try:
        dockers = await open_dockers(pool)
        clusters = await status(pool, dockers=dockers)
        if not clusters:
            raise NoClusterError()
        try:
            cluster = pick_cluster(clusters)
        except SparkError:
            if len(clusters) != 1:
                raise
            cluster = clusters[0]  # stopped, but its log is still there to read
        ranks = [r for r in cluster.ranks if args.rank is None or r.rank == args.rank]
        if not ranks:
            raise InputError(
                f"cluster {cluster.cluster_id} has no rank {args.rank}",
                f"ranks are {', '.join(str(r.rank) for r in cluster.ranks)}",
            )
        tail = args.tail if args.tail and args.tail > 0 else "all"
        if not args.follow:
            merged = []
            for r in ranks:
                for rec in await dockers[r.node].logs(r.container, tail=tail):
                    merged.append((rec.ts_ns, r.rank, r.node, rec.text))
            merged.sort(key=lambda x: (x[0], x[1]))
            for _ts, rank, node, text in merged:
                print(f"{_prefix(rank, node)} {text}")
            return EXIT_OK

        def down(r, o) -> None:  # type: ignore[no-untyped-def]
            why = f"{o.node} unreachable since {o.seconds:.0f} s, retrying: {o.reason}"
            print(f"{_prefix(r.rank, r.node)} ({why})", file=sys.stderr, flush=True)

        def back(r, o) -> None:  # type: ignore[no-untyped-def]
            again = f"{o.node} reachable again after {o.seconds:.0f} s; the log resumes"
            print(f"{_prefix(r.rank, r.node)} ({again})", file=sys.stderr, flush=True)

        async def follow(r) -> None:  # type: ignore[no-untyped-def]
            # An outage of any length is waited out: the log resumes without loss or repeat.
            follower = RankLogFollower(
                dockers[r.node],
                r.container,
                tail=tail,
                on_outage=lambda o: down(r, o),
                on_back=lambda o: back(r, o),
            )
            async for rec in follower.records():
                print(f"{_prefix(r.rank, r.node)} {rec.text}", flush=True)
            print(f"{_prefix(r.rank, r.node)} (container {r.container} ended)", file=sys.stderr)

        await asyncio.gather(*(follow(r) for r in ranks))
        return EXIT_OK
    finally:
        await close_dockers(dockers)
        await s.close()


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _logs(args))

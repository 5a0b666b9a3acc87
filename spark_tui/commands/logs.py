"""`spark-tui logs (--inventory FILE | --hosts ...) [--rank R] [--follow] [--tail N]`: the
ranks' logs, each line prefixed with its rank and node. `--follow` keeps reading (across
dropped connections of any length, without losing or repeating a line) until every
container ends, Ctrl+C, SIGTERM or SIGHUP (which close every connection before exiting).
The session's logs action does the reading (see `service.logs`); this prints it."""

from __future__ import annotations

import argparse
import sys

from spark_tui.commands.interrupts import run_command
from spark_tui.core.errors import EXIT_OK
from spark_tui.service import events as ev


def _prefix(rank: int, node: str) -> str:
    return f"[{rank} {node}]"


def render(event: object) -> None:
    """A log line on stdout; an outage, a resume or an ended container on stderr."""
    if isinstance(event, ev.RankLogRecord):
        print(f"{_prefix(event.rank, event.node)} {event.text}", flush=True)
    elif isinstance(event, ev.NodeUnreachable):
        for rank in event.ranks:
            why = f"{event.node} unreachable since {event.seconds:.0f} s, retrying: {event.reason}"
            print(f"{_prefix(rank, event.node)} ({why})", file=sys.stderr, flush=True)
    elif isinstance(event, ev.NodeReachable):
        for rank in event.ranks:
            again = (
                f"{event.node} reachable again after {event.outage_seconds:.0f} s; the log resumes"
            )
            print(f"{_prefix(rank, event.node)} ({again})", file=sys.stderr, flush=True)
    elif isinstance(event, ev.RankLogEnded):
        print(
            f"{_prefix(event.rank, event.node)} (container {event.container} ended)",
            file=sys.stderr,
            flush=True,
        )


async def _logs(args: argparse.Namespace) -> int:
    from spark_tui.commands.terminal import session

    s = session(args)
    tail = args.tail if args.tail and args.tail > 0 else None
    try:
        async for event in s.logs(rank=args.rank, tail=tail, follow=args.follow):
            render(event)
    finally:
        await s.close()
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _logs(args))

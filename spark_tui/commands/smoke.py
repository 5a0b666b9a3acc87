"""`spark-tui smoke`: health, models, chat, tool-call and streaming checks of a running service."""

from __future__ import annotations

import argparse
import json

from spark_tui.commands.terminal import with_nodes
from spark_tui.core.errors import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, InputError


def _print_result(r: object) -> None:
    from spark_tui.service.smoke import SmokeResult

    assert isinstance(r, SmokeResult)
    print(r.summary(), flush=True)
    if not r.ok:
        if r.cause:
            print(f"           cause:  {r.cause}", flush=True)
        if r.remedy:
            print(f"           remedy: {with_nodes(r.remedy)}", flush=True)


def need_server(args: argparse.Namespace) -> None:
    """--base-url, or nodes to find the running cluster on."""
    if not (args.base_url or args.inventory or args.hosts):
        raise InputError(
            "no server named",
            "pass --base-url URL (e.g. http://127.0.0.1:8000), or --inventory FILE / "
            "--hosts H1,H2 to find the running cluster",
        )


async def _smoke(args: argparse.Namespace) -> int:
    from spark_tui.commands.terminal import consume, err, session
    from spark_tui.service import events as ev
    from spark_tui.service.smoke import server_unreachable

    need_server(args)
    s = session(args, nodes_needed=False)

    def on_event(event: ev.SmokeEvent) -> None:
        if args.json:
            return
        if isinstance(event, ev.Notice):
            print(event.message, flush=True)
        elif isinstance(event, ev.SmokeChecked):
            _print_result(event.result)
        elif isinstance(event, ev.Recorded) and event.error:
            err(f"spark-tui: {event.error}")

    try:
        seen = await consume(
            s.smoke(base_url=args.base_url, model=args.model, timeout=args.timeout),
            on_event=on_event,
        )
    finally:
        await s.close()
    done = next(e for e in seen if isinstance(e, ev.SmokeDone))
    if args.json:
        out = {
            "base_url": done.base_url,
            "ok": done.ok,
            "run_id": done.run_id,
            "checks": [r.to_dict() for r in done.results],
        }
        print(json.dumps(out, indent=2))
    else:
        passed = sum(1 for r in done.results if r.ok)
        run = f" (run {done.run_id})" if done.run_id else ""
        print(f"{passed}/{len(done.results)} checks passed{run}")
    if done.ok:
        return EXIT_OK
    if not args.base_url and server_unreachable(done.results):
        return EXIT_UNREACHABLE
    return EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    from spark_tui.commands.interrupts import run_command

    return int(run_command(lambda: _smoke(args)))

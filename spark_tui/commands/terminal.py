"""What every headless command shares: the nodes from its flags, the session over them,
questions answered on the terminal (or by a flag), progress lines on stderr; the cockpit's
need of a terminal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from spark_tui.core.errors import InputError
from spark_tui.service.targets import Targets

if TYPE_CHECKING:
    from spark_tui.service.events import Question
    from spark_tui.service.session import Session

T = TypeVar("T")


def targets(args: argparse.Namespace) -> Targets:
    """The nodes the flags name (plain values: argparse stops here)."""
    return Targets(
        inventory=getattr(args, "inventory", None),
        hosts=getattr(args, "hosts", None),
        facts=getattr(args, "facts", None),
        accept_new_host_keys=bool(getattr(args, "accept_new_host_keys", False)),
        hosts_file=getattr(args, "hosts_file", None),
        sparkrun_cluster=getattr(args, "sparkrun_cluster", None),
    )


def session(args: argparse.Namespace, *, nodes_needed: bool = True, **kw: Any) -> Session:
    """A session over the nodes the flags name (none for `--base-url` alone)."""
    from spark_tui.service.session import Session
    from spark_tui.service.targets import inventory_nodes

    t = targets(args)
    nodes = inventory_nodes(t) if (nodes_needed or t.given) else []
    s = Session(nodes, accept_new_host_keys=t.accept_new_host_keys, **kw)
    if t.given:
        s.where = t.as_flags(live=True)
    return s


def run_lazily(main: Callable[[], Any]) -> Any:
    """`_interrupts.run_command`, imported only when a command does talk to nodes: `plan`
    and `check` from a facts file never need asyncio."""
    from spark_tui.commands._interrupts import run_command

    return run_command(main)


def err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def answer(question: Question, flags: Mapping[str, bool | None]) -> None:
    """A flag answers (e.g. --force for `insist`); else ask on a terminal, like ssh does;
    without one the question stays unanswered and its default stands."""
    given = flags.get(question.kind)
    if given is not None:
        question.reply(given)
        return
    if not sys.stdin.isatty():
        # Said once, by the action: its error tells what it decided, why, and the flag that
        # answers the question.
        return
    sys.stderr.write(f"{question.text} (yes/no) ")
    sys.stderr.flush()
    question.reply(sys.stdin.readline().strip().lower() in ("yes", "y"))


def show(event: Any) -> None:
    """One progress line on stderr for an event (log lines only when they matter)."""
    from spark_tui.service import events as ev

    if isinstance(event, ev.RankStateChanged):
        extra = ""
        if event.state is ev.RankState.LOADING and event.progress is not None:
            extra = f" {event.progress:.0%}"
        if event.reason:
            extra = f": {event.reason}"
        err(f"rank {event.rank} {event.node}: {event.state.value}{extra}")
        for line in event.explaining_lines:
            err(f"    | {line}")
    elif isinstance(event, ev.LogLine):
        if event.kind in ("error", "warning", "phase", "ready"):
            err(f"[{event.rank} {event.node}] {event.text}")
    elif isinstance(event, ev.Notice):
        err(
            f"{event.level}: {event.message}"
            + (f"\n  remedy: {event.remedy}" if event.remedy else "")
        )
    elif isinstance(event, ev.ClusterReady):
        err(f"cluster {event.cluster_id} is ready")
    elif isinstance(event, ev.NodeUnreachable):
        err(f"warning: {event.text}\n  remedy: {event.remedy}")
    elif isinstance(event, ev.NodeReachable):
        err(f"{event.node} reachable again after {event.outage_seconds:.0f} s")
    elif isinstance(event, ev.Evaluated):
        e = event.evaluation
        err(f"fit: {e.verdict}")
        for f in e.report.findings if e.report else []:
            if f.severity in ("error", "warning"):
                err(f"  {f.severity}: {f.message}\n    remedy: {f.remedy}")
    elif isinstance(event, ev.Endpoint):
        err(f"API on {event.head}: {event.api_url}\n  from your machine: {event.tunnel}")
    elif isinstance(event, ev.Recorded) and event.error:
        err(f"warning: {event.error}")
    elif isinstance(event, ev.BenchProgressed):
        p = event.progress
        tty = sys.stderr.isatty()
        if tty or p.done == p.total:
            end = "\n" if p.done == p.total else ""
            sys.stderr.write(
                ("\r" if tty else "")
                + f"  level {p.level_index + 1}/{p.levels} (concurrency {p.concurrency}, repeat "
                f"{p.repeat + 1}): {p.done}/{p.total} requests, {p.errors} errors, "
                f"{p.elapsed_s:.1f} s{end}"
            )
            sys.stderr.flush()


async def consume(
    events: AsyncIterator[Any],
    flags: Mapping[str, bool | None] | None = None,
    on_event: Callable[[Any], None] = show,
) -> list[Any]:
    """Every event of an action, questions answered (see `answer`); returns them."""
    from spark_tui.service.events import Question

    seen = []
    async for event in events:
        if isinstance(event, Question):
            answer(event, flags or {})
        else:
            on_event(event)
        seen.append(event)
    return seen


def require_terminal(command: str) -> None:
    """Raise an InputError when stdin or stdout is not a terminal (a pipe, /dev/null, a file)."""
    missing = [
        name
        for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
        if stream is None or not stream.isatty()
    ]
    if missing:
        raise InputError(
            f"`{command}` needs a terminal, but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not one",
            "run it in a terminal (over SSH: `ssh -t`); without one, use the headless "
            "commands: `spark-tui sim` for simulated Sparks, then probe, check, launch, "
            "smoke, bench with --inventory",
        )

"""What every headless command shares: the nodes from its flags, the session over them,
questions answered on the terminal (or by a flag), progress lines on stderr."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from spark_tui.service.events import Question, ServiceEvent
    from spark_tui.service.session import Session
    from spark_tui.service.targets import Targets

# The events of one action (`LaunchEvent`, `SmokeEvent`, ...).
E = TypeVar("E", bound="ServiceEvent")


def targets(args: argparse.Namespace) -> Targets:
    """The nodes the flags name (plain values: argparse stops here)."""
    from spark_tui.service.targets import Targets

    return Targets(
        inventory=getattr(args, "inventory", None),
        hosts=getattr(args, "hosts", None),
        facts=getattr(args, "facts", None),
        accept_new_host_keys=bool(getattr(args, "accept_new_host_keys", False)),
        hosts_file=getattr(args, "hosts_file", None),
        sparkrun_cluster=getattr(args, "sparkrun_cluster", None),
        on=getattr(args, "on", None),
    )


def session(args: argparse.Namespace, *, nodes_needed: bool = True, **kw: Any) -> Session:
    """A session over the nodes the flags name, only the ones `--on` picks (none for
    `--base-url` alone)."""
    from spark_tui.core.selection import pick_nodes
    from spark_tui.service.session import Session
    from spark_tui.service.targets import given_inventory

    t = targets(args)
    wanted = nodes_needed or t.given
    given = given_inventory(t) if wanted else []
    nodes, unpicked = pick_nodes(given, t.picked) if wanted else ([], None)
    kw.setdefault("cluster_id", getattr(args, "cluster", None))
    s = Session(nodes, accept_new_host_keys=t.accept_new_host_keys, unpicked=unpicked, **kw)
    s.node_order = [n.name for n in given]
    if t.given:
        s.where = t.as_flags(live=True)
    return s


def run_lazily(main: Callable[[], Any]) -> Any:
    """`interrupts.run_command`, imported only when a command does talk to nodes: `plan`
    and `check` from a facts file never need asyncio."""
    from spark_tui.commands.interrupts import run_command

    return run_command(main)


# A command of ours named in backquotes, e.g. a remedy's `spark-tui logs --rank 0`: the
# layers below the CLI do not know how the user named the nodes.
_NAMED_COMMAND = re.compile(r"`spark-tui (logs|status|stop|smoke|bench|watch)(?=[ `])([^`]*)`")
_NODE_FLAG = re.compile(r"(?:^| )--(?:inventory|hosts|hosts-file|sparkrun-cluster|facts)\b")
_where: str | None = None


def name_nodes(args: argparse.Namespace) -> None:
    """Remember how the user named the nodes, for `err` to complete the commands it prints
    (nothing when no node flag was given: `--inventory FILE` says that better)."""
    global _where
    t = targets(args)
    _where = t.as_flags(live=True) if t.given else None


def with_nodes(text: str, where: str | None = None) -> str:
    """`text` with each backquoted `spark-tui CMD ...` that needs nodes and names none given
    the user's own node flags (`where`, else the ones `name_nodes` remembered), so that a
    remedy can be run as printed."""
    where = where if where is not None else _where
    if not where:
        return text

    def fill(m: re.Match[str]) -> str:
        command, rest = m.group(1), m.group(2)
        if _NODE_FLAG.search(rest):
            return m.group(0)
        return f"`spark-tui {command} {where}{rest}`"

    return _NAMED_COMMAND.sub(fill, text)


def err(text: str) -> None:
    print(with_nodes(text), file=sys.stderr, flush=True)


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
    # Enter alone takes the question's default (yes where yes keeps the service).
    sys.stderr.write(
        f"{question.text} (yes/no) " if not question.default else f"{question.text} (YES/no) "
    )
    sys.stderr.flush()
    reply = sys.stdin.readline().strip().lower()
    question.reply(reply in ("yes", "y") if reply else question.default)


def show(event: ServiceEvent) -> None:
    """One progress line on stderr for an event (log lines only when they matter); what an
    action ends with (results, a stop, a comparison) is its command's to print."""
    from spark_tui.service import events as ev

    match event:
        case ev.RankStateChanged(rank=rank, node=node, state=state, reason=reason):
            extra = ""
            if state is ev.RankState.LOADING and event.progress is not None:
                extra = f" {event.progress:.0%}"
            if reason:
                extra = f": {reason}"
            err(f"rank {rank} {node}: {state.value}{extra}")
            for line in event.explaining_lines:
                err(f"    | {line}")
        case ev.LogLine(kind="error" | "warning" | "phase" | "ready"):
            err(f"[{event.rank} {event.node}] {event.text}")
        case ev.Notice(level=level, message=message, remedy=remedy):
            err(f"{level}: {message}" + (f"\n  remedy: {remedy}" if remedy else ""))
        case ev.ClusterReady(cluster_id=cluster_id):
            err(f"cluster {cluster_id} is ready")
        case ev.NodeUnreachable():
            err(f"warning: {event.text}\n  remedy: {event.remedy}")
        case ev.NodeReachable(node=node, outage_seconds=seconds):
            err(f"{node} reachable again after {seconds:.0f} s")
        case ev.Evaluated(evaluation=e):
            err(f"fit: {e.verdict}")
            for f in e.report.findings if e.report else []:
                # Which nodes run it is said too: the layout may leave some out.
                if f.severity in ("error", "warning") or f.code == "nodes_left_out":
                    err(f"  {f.severity}: {f.message}\n    remedy: {f.remedy}")
        case ev.Endpoint(head=head, api_url=api_url, tunnel=tunnel):
            err(f"API on {head}: {api_url}\n  from your machine: {tunnel}")
        case ev.Recorded(error=str() as error):
            err(f"warning: {error}")
        case ev.BenchProgressed(progress=p):
            tty = sys.stderr.isatty()
            if tty or p.done == p.total:
                end = "\n" if p.done == p.total else ""
                sys.stderr.write(
                    ("\r" if tty else "")
                    + f"  level {p.level_index + 1}/{p.levels} (concurrency {p.concurrency}, "
                    f"repeat {p.repeat + 1}): {p.done}/{p.total} requests, {p.errors} errors, "
                    f"{p.elapsed_s:.1f} s{end}"
                )
                sys.stderr.flush()
        case _:
            pass


async def consume(
    events: AsyncIterator[E],
    flags: Mapping[str, bool | None] | None = None,
    on_event: Callable[[E], None] | None = None,
) -> list[E]:
    """Every event of an action, questions answered (see `answer`), the others shown by
    `on_event` (else `show`); returns them."""
    from spark_tui.service.events import Question

    seen: list[E] = []
    async for event in events:
        if isinstance(event, Question):
            answer(event, flags or {})
        elif on_event is not None:
            on_event(event)
        else:
            show(event)
        seen.append(event)
    return seen

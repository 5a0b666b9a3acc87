"""`spark-tui watch (--inventory FILE | --hosts ...) [--interval S] [--keep-failed] [--json]`:
watch a ready cluster (a 1-token request, /metrics, node memory and the ranks' link, every
rank's container) and print what it sees as text or JSON lines. On a failure, its
diagnosis; then every rank is
stopped and its last lines kept in the history, as after a failed launch (with
--keep-failed the ranks are left, and the command that removes them is printed). Exit 1 on
a failure, 3 when the nodes cannot be reached at the start, 0 on Ctrl+C."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys

from spark_tui.commands.terminal import with_nodes
from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.core.link import GB, fmt_gbs, fmt_share
from spark_tui.service import events as ev


def _gb(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def _num(x: float | None, fmt: str = "{:g}") -> str:
    return "?" if x is None else fmt.format(x)


def render(e: ev.WatchEvent) -> list[str]:
    """The text lines of one watch event."""
    if isinstance(e, ev.WatchStarted):
        return [
            f"watching cluster {e.cluster_id} ({e.recipe or '?'}) on {', '.join(e.nodes)}"
            f" through {e.base_url}"
        ]
    if isinstance(e, ev.ProbeResult):
        if e.ok:
            return [f"probe ok  1 token in {e.latency_s * 1000:.0f} ms"]
        what = e.error if e.status is None else f"{e.status}: {e.error}"
        return [f"probe FAILED  {what}"]
    if isinstance(e, ev.ServiceGauges):
        kv = None if e.kv_cache_usage is None else e.kv_cache_usage * 100
        return [
            f"gauges  running {_num(e.running)}  waiting {_num(e.waiting)}  "
            f"kv cache {_num(kv, '{:.1f}')}%  gen {_num(e.generation_tokens_per_s, '{:.1f}')} tok/s"
            f"  prompt {_num(e.prompt_tokens_per_s, '{:.1f}')} tok/s"
        ]
    if isinstance(e, ev.NodeMemory):
        return [f"memory  {e.node}  available {_gb(e.available)} of {_gb(e.total)}"]
    if isinstance(e, ev.LinkSample):
        out = [
            f"link  {e.node}  {r.interface}  rx {fmt_gbs(r.rx_bytes_per_s)} GB/s  "
            f"tx {fmt_gbs(r.tx_bytes_per_s)} GB/s  {fmt_share(r.share)} of "
            + ("?" if r.speed_bytes_per_s is None else f"{r.speed_bytes_per_s / GB:g}")
            + " GB/s"
            for r in e.interfaces
        ]
        out += [f"link  {e.node}  {name}: no such interface on the node" for name in e.missing]
        return out
    if isinstance(e, ev.ContainerStates):
        parts = [f"rank {r.rank} {r.state}" for r in e.ranks]
        parts += [f"rank {m} missing" for m in e.missing]
        return ["containers  " + ", ".join(parts)]
    if isinstance(e, ev.NodeNotAnswering):
        return [f"unreachable  {e.node} since {e.since_s:g} s, retrying: {e.message}"]
    if isinstance(e, ev.WatchAlert):
        out = [f"FAILED: rank {e.rank} on {e.node} {e.reason}"]
        out += [f"  | {ev.alert_line(line)}" for line in e.lines]
        out += [f"  then: {o}" for o in e.others]
        if e.head_lines:
            out.append("  the head says:")
            out += [f"  | {ev.alert_line(line)}" for line in e.head_lines]
        if e.cleanup:
            out.append(f"clean up: {e.cleanup}")
        return out
    if isinstance(e, ev.Stopped):
        out = [f"removed {name} on {node}" for node, name in e.removed]
        out += [f"still there: {name} on {node}" for node, name in e.left]
        return out
    if isinstance(e, ev.Notice):
        return [e.message] + ([f"  remedy: {with_nodes(e.remedy)}"] if e.remedy else [])
    return []


def _json(e: ev.WatchEvent) -> str:
    assert dataclasses.is_dataclass(e) and not isinstance(e, type)
    return json.dumps({"event": type(e).__name__, **dataclasses.asdict(e)})


async def _watch(args: argparse.Namespace) -> int:
    from spark_tui.commands.terminal import session, targets

    cleanup = targets(args).command("stop", live=True)
    as_json = getattr(args, "json", False)
    s = session(args)
    failed = False
    stopped: str | None = None
    try:
        async for e in s.watch(
            getattr(args, "cluster", None),
            interval=args.interval,
            cleanup=cleanup,
            keep_failed=bool(getattr(args, "keep_failed", False)),
        ):
            failed = failed or isinstance(e, ev.WatchAlert)
            if isinstance(e, ev.Stopped):
                stopped = e.cluster_id
            if as_json:
                print(_json(e), flush=True)
            else:
                after = (ev.WatchAlert, ev.Stopped, ev.Notice)
                out = sys.stderr if isinstance(e, after) else sys.stdout
                for line in render(e):
                    print(line, file=out, flush=True)
        run = s.history.launch_of(stopped) if stopped and not as_json else None
        if run is not None:
            print(f"  read them: spark-tui history show {run.id}", file=sys.stderr, flush=True)
    finally:
        await s.close()
    return EXIT_FAILED if failed else EXIT_OK


def run(args: argparse.Namespace) -> int:
    from spark_tui.commands.interrupts import CommandInterrupted, run_command

    try:
        return run_command(lambda: _watch(args))
    except CommandInterrupted as exc:
        if exc.signum != signal.SIGINT:
            raise
        # Ctrl+C is how a watch is meant to end: the cluster is left as it is.
        print("spark-tui: watch ended (Ctrl+C); the cluster keeps running", file=sys.stderr)
        return EXIT_OK

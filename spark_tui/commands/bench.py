"""`spark-tui bench`: a concurrency sweep measured on the client, recorded in the history."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.core.link import GB, fmt_gbs, fmt_share
from spark_tui.service.bench import TABLE_FIGURES, fmt_figure

if TYPE_CHECKING:
    from spark_tui.service.bench import BenchConfig, BenchResult


def bench_config(args: argparse.Namespace) -> BenchConfig:
    """The benchmark settings the flags give (the defaults are the cockpit's too)."""
    from spark_tui.service.bench import BenchSettings

    return BenchSettings(
        concurrency=args.concurrency,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        workload_file=args.workload_file or "",
        shared_prefix=args.shared_prefix,
        context_depths=args.context_depth,
        goodput=" ".join(args.goodput),
        repeats=str(args.repeats),
        requests_per_level=str(args.requests_per_level),
        seed=str(args.seed),
    ).config()


# Columns after which a table too wide for an 80-column terminal is cut in two: the latency
# figures, then the throughput and the server's gauges (each with the level's columns).
WIDTH = 80
_LATENCY_COLUMNS = 7


def format_table(result: BenchResult) -> str:
    """The levels as a fixed-width table (a depth column when measured at depths, goodput
    when targets were set, each figure's 95 % interval below its level with repeats); two
    tables, latency then throughput, when one would not fit 80 columns."""
    from spark_tui.core.wording import depth_label

    workload = result.config.workload
    depths = workload.context_depths != (0,)
    header = [
        ("conc", 4), ("reqs", 5), ("err", 3), ("TTFT p50", 10), ("TTFT p95", 10),
        ("ITL mean", 10), ("ITL p95", 10), ("tok/s/req", 9), ("tok/s", 8), ("req/s", 6),
        ("KV max", 6), ("run", 4), ("wait", 4),
    ]  # fmt: skip
    if workload.goodput:
        header.append(("goodput", 7))
    rows: list[tuple[str, list[str], str | None]] = []
    for lv in result.levels:
        f = lv.figures
        kv = lv.metrics.get("kv_cache_usage_perc", {}).get("max")
        run = lv.metrics.get("num_requests_running", {}).get("max")
        wait = lv.metrics.get("num_requests_waiting", {}).get("max")
        cells = [
            str(lv.concurrency),
            str(lv.requests),
            str(lv.errors),
            *(fmt_figure(name, f.get(name)) for name in TABLE_FIGURES),
            "-" if kv is None else f"{kv * 100:.0f}%",
            "-" if run is None else f"{run:.0f}",
            "-" if wait is None else f"{wait:.0f}",
        ]
        if workload.goodput:
            cells.append(fmt_figure("goodput_rps", f.get("goodput_rps")))
        depth = f"{depth_label(lv.context_depth):>5} " if depths else ""
        ci = _wrapped("      95% CI over repeats: ", ci_parts(lv.ci95)) if lv.ci95 else None
        rows.append((depth, cells, ci))

    def table(columns: list[int], with_ci: bool) -> list[str]:
        lines = [("depth " if depths else "") + " ".join(_cell(header[i]) for i in columns)]
        for depth, cells, ci in rows:
            lines.append(depth + " ".join(cells[i].rjust(header[i][1]) for i in columns))
            if ci and with_ci:
                lines.append(ci)
        return lines

    every = list(range(len(header)))
    whole = table(every, True)
    if len(whole[0]) <= WIDTH:
        return "\n".join(whole)
    latency = table(every[:_LATENCY_COLUMNS], True)
    rest = table([0, *every[_LATENCY_COLUMNS:]], False)
    return "\n".join([*latency, *rest])


def _wrapped(head: str, items: list[str], sep: str = ", ") -> str:
    """`head` then the items, wrapped at 80 columns between items (never inside one: a
    figure stays with its unit), the next lines under `head`'s indent."""
    indent = " " * (len(head) - len(head.lstrip()) + 2)
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + (sep if i < len(items) - 1 else "")
        if len(line) + len(piece.rstrip()) > WIDTH and line.strip() != head.strip():
            lines.append(line.rstrip())
            line = indent
        line += piece
    lines.append(line.rstrip())
    return "\n".join(lines)


def _cell(column: tuple[str, int]) -> str:
    name, width = column
    return name.rjust(width)


def format_link(result: BenchResult) -> str:
    """The ranks' interfaces and every node's memory while the benchmark ran ("" when not
    sampled: a server not of ours)."""
    if not result.link and not result.memory:
        return ""
    width = max([len(f"{f.node} {f.interface}") for f in result.link] + [14])
    lines = [
        f"{'link (GB/s)':<{width}} {'rx peak':>8} {'rx mean':>8} {'tx peak':>8} {'tx mean':>8} "
        f"{'peak share of link':>18}"
    ]
    for f in result.link:
        share = fmt_share(f.peak_share)
        speed = f" of {f.speed_gbs:g} GB/s" if f.speed_gbs else ""
        lines.append(
            f"{f.node + ' ' + f.interface:<{width}} {_gbs(f.rx_peak_gbs):>8} "
            f"{_gbs(f.rx_mean_gbs):>8} {_gbs(f.tx_peak_gbs):>8} {_gbs(f.tx_mean_gbs):>8} "
            f"{share + speed:>18}"
        )
    if not result.link:
        lines = ["link: no rank interface named (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME)"]
    mem = [f"{m.node} {_gib(m.min_available)}/{_gib(m.total)} GiB" for m in result.memory]
    if mem:
        lines.append(_wrapped("memory free at least: ", mem, " · "))
    return "\n".join(lines)


def _gbs(value: float | None) -> str:
    return fmt_gbs(None if value is None else value * GB)


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / 1024**3:.1f}"


def ci_text(ci95: dict[str, list[float]]) -> str:
    """`TTFT p50 41.00 to 45.20 ms, tok/s 380.12 to 402.50` for the main figures' intervals
    (as the cockpit says them: with a dash, a negative lower bound read as a range)."""
    return ", ".join(ci_parts(ci95))


def ci_parts(ci95: dict[str, list[float]]) -> list[str]:
    """Each main figure's interval, as `ci_text` joins them."""
    parts = []
    for name, label in (
        ("ttft_p50_s", "TTFT p50"),
        ("itl_mean_s", "ITL mean"),
        ("total_output_tps", "tok/s"),
        ("goodput_rps", "goodput"),
    ):
        if name in ci95:
            low, high = ci95[name]
            unit = " ms" if name.endswith("_s") else ""
            scale = 1000 if unit else 1
            parts.append(f"{label} {low * scale:.2f} to {high * scale:.2f}{unit}")
    return parts


def report(done: object, as_json: bool) -> None:
    """The finished (or cancelled) benchmark on stdout."""
    from spark_tui.service.events import BenchDone

    assert isinstance(done, BenchDone)
    result = done.result
    if as_json:
        print(json.dumps({"run_id": done.run_id, **result.to_dict()}, indent=2))
        return
    print(f"model {result.model} at {result.base_url}")
    print(f"workload: {result.config.workload.summary()}")
    for note in result.notes:
        print(f"note: {note}")
    print(format_table(result))
    link = format_link(result)
    if link:
        print(link)
    state = " (cancelled: partial results)" if result.cancelled else ""
    print(f"recorded as run {done.run_id}{state}" if done.run_id else state.strip())


async def _bench(args: argparse.Namespace) -> int:
    from spark_tui.commands.smoke import need_server
    from spark_tui.commands.terminal import consume, err, session, show
    from spark_tui.service import events as ev

    need_server(args)
    config = bench_config(args)
    s = session(args, nodes_needed=False)
    done: list[ev.BenchDone] = []

    def on_event(event: ev.BenchEvent) -> None:
        if isinstance(event, ev.BenchDone):
            done.append(event)
        elif isinstance(event, ev.Notice):
            err(event.message)
        else:
            show(event)

    try:
        await consume(s.bench(config, base_url=args.base_url, model=args.model), on_event=on_event)
    finally:
        await s.close()
    report(done[0], args.json)
    errors = sum(lv.errors for lv in done[0].result.levels)
    return EXIT_OK if errors == 0 else EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    from spark_tui.commands.interrupts import run_command

    return int(run_command(lambda: _bench(args)))

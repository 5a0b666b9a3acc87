"""`spark-tui bench`: a concurrency sweep measured on the client, recorded in the history."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.core.link import GB, fmt_gbs, fmt_share
from spark_tui.service.bench import fmt_figure

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


def format_table(result: BenchResult) -> str:
    """The levels as a fixed-width table (a depth column when measured at depths, goodput
    when targets were set, each figure's 95 % interval below its level with repeats)."""
    from spark_tui.core.wording import depth_label

    workload = result.config.workload
    depths = workload.context_depths != (0,)
    head = (
        f"{'depth ' if depths else ''}{'conc':>4} {'reqs':>5} {'err':>3} {'TTFT p50':>10} "
        f"{'TTFT p95':>10} {'ITL mean':>10} {'ITL p95':>10} {'tok/s/req':>9} {'tok/s':>8} "
        f"{'req/s':>6} {'KV max':>6} {'run':>4} {'wait':>4}"
        + (f" {'goodput':>7}" if workload.goodput else "")
    )
    lines = [head]
    for lv in result.levels:
        f = lv.figures
        depth = f"{depth_label(lv.context_depth):>5} " if depths else ""
        kv = lv.metrics.get("kv_cache_usage_perc", {}).get("max")
        run = lv.metrics.get("num_requests_running", {}).get("max")
        wait = lv.metrics.get("num_requests_waiting", {}).get("max")
        goodput = (
            f" {fmt_figure('goodput_rps', f.get('goodput_rps')):>7}" if workload.goodput else ""
        )
        lines.append(
            f"{depth}{lv.concurrency:>4} {lv.requests:>5} {lv.errors:>3} "
            f"{fmt_figure('ttft_p50_s', f.get('ttft_p50_s')):>10} "
            f"{fmt_figure('ttft_p95_s', f.get('ttft_p95_s')):>10} "
            f"{fmt_figure('itl_mean_s', f.get('itl_mean_s')):>10} "
            f"{fmt_figure('itl_p95_s', f.get('itl_p95_s')):>10} "
            f"{fmt_figure('tps_per_request_mean', f.get('tps_per_request_mean')):>9} "
            f"{fmt_figure('total_output_tps', f.get('total_output_tps')):>8} "
            f"{fmt_figure('requests_per_s', f.get('requests_per_s')):>6} "
            f"{'-' if kv is None else f'{kv * 100:.0f}%':>6} "
            f"{'-' if run is None else f'{run:.0f}':>4} "
            f"{'-' if wait is None else f'{wait:.0f}':>4}{goodput}"
        )
        if lv.ci95:
            lines.append("      95% CI over repeats: " + ci_text(lv.ci95))
    return "\n".join(lines)


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
        lines.append("memory free at least: " + " · ".join(mem))
    return "\n".join(lines)


def _gbs(value: float | None) -> str:
    return fmt_gbs(None if value is None else value * GB)


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / 1024**3:.1f}"


def ci_text(ci95: dict[str, list[float]]) -> str:
    """`TTFT p50 41.00 to 45.20 ms, tok/s 380.12 to 402.50` for the main figures' intervals
    (as the cockpit says them: with a dash, a negative lower bound read as a range)."""
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
    return ", ".join(parts)


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

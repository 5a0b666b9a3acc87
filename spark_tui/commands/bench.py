"""`spark-tui bench`: a concurrency sweep measured on the client, recorded in the history."""

from __future__ import annotations

import argparse
import json
import sys

from spark_tui.commands._interrupts import run_command
from spark_tui.commands.smoke import Target, open_target
from spark_tui.core.errors import (
    EXIT_FAILED,
    EXIT_OK,
    InputError,
    OperationFailed,
    UnreachableError,
)
from spark_tui.ops.bench import BenchConfig, BenchError, BenchProgress, BenchResult, BenchRun
from spark_tui.ops.compare import fmt_figure
from spark_tui.ops.history import History


def parse_concurrency(text: str) -> tuple[int, ...]:
    """`1,4,8` -> (1, 4, 8); every level a positive integer."""
    try:
        levels = tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        levels = ()
    if not levels or any(c < 1 for c in levels):
        raise InputError(
            f"--concurrency {text!r} is not a list of positive integers",
            "write it like --concurrency 1,4,8",
        )
    return levels


def _progress(p: BenchProgress) -> None:
    # A terminal gets one line rewritten in place; a pipe or log file one line per level.
    tty = sys.stderr.isatty()
    if not tty and p.done < p.total:
        return
    end = "\n" if p.done == p.total else ""
    sys.stderr.write(
        ("\r" if tty else "")
        + f"  level {p.level_index + 1}/{p.levels} (concurrency {p.concurrency}, repeat "
        f"{p.repeat + 1}): {p.done}/{p.total} requests, {p.errors} errors, {p.elapsed_s:.1f} s"
        f"{end}"
    )
    sys.stderr.flush()


def format_table(result: BenchResult) -> str:
    """The levels as a fixed-width table."""
    head = (
        f"{'conc':>4} {'reqs':>5} {'err':>3} {'TTFT p50':>10} {'TTFT p95':>10} {'ITL mean':>10} "
        f"{'ITL p95':>10} {'tok/s/req':>9} {'tok/s':>8} {'req/s':>6} {'KV max':>6} "
        f"{'run':>4} {'wait':>4}"
    )
    lines = [head]
    for lv in result.levels:
        f = lv.figures
        kv = lv.metrics.get("kv_cache_usage_perc", {}).get("max")
        run = lv.metrics.get("num_requests_running", {}).get("max")
        wait = lv.metrics.get("num_requests_waiting", {}).get("max")
        lines.append(
            f"{lv.concurrency:>4} {lv.requests:>5} {lv.errors:>3} "
            f"{fmt_figure('ttft_p50_s', f.get('ttft_p50_s')):>10} "
            f"{fmt_figure('ttft_p95_s', f.get('ttft_p95_s')):>10} "
            f"{fmt_figure('itl_mean_s', f.get('itl_mean_s')):>10} "
            f"{fmt_figure('itl_p95_s', f.get('itl_p95_s')):>10} "
            f"{fmt_figure('tps_per_request_mean', f.get('tps_per_request_mean')):>9} "
            f"{fmt_figure('total_output_tps', f.get('total_output_tps')):>8} "
            f"{fmt_figure('requests_per_s', f.get('requests_per_s')):>6} "
            f"{'-' if kv is None else f'{kv * 100:.0f}%':>6} "
            f"{'-' if run is None else f'{run:.0f}':>4} "
            f"{'-' if wait is None else f'{wait:.0f}':>4}"
        )
    return "\n".join(lines)


async def _run(args: argparse.Namespace, history: History, holder: list[BenchRun]) -> Target:
    config = BenchConfig(
        concurrency=parse_concurrency(args.concurrency),
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        requests_per_level=args.requests_per_level,
        repeats=getattr(args, "repeats", 1),
    )
    if config.repeats < 1 or config.requests_per_level < 0:
        raise InputError("--repeats must be >= 1 and --requests-per-level >= 0", "pass counts")
    if config.prompt_tokens < 1 or config.output_tokens < 1:
        raise InputError(
            "--prompt-tokens and --output-tokens must be at least 1", "pass positive lengths"
        )
    async with open_target(args, history) as target:
        bench = BenchRun(target.base_url, args.model or target.model, config, progress=_progress)
        holder.append(bench)
        sys.stderr.write(
            f"benchmark of {target.base_url}: concurrency {list(config.concurrency)}, prompt "
            f"{config.prompt_tokens} tokens, output {config.output_tokens} tokens\n"
        )
        try:
            await bench.run()
        except BenchError as exc:
            err = UnreachableError if exc.unreachable and target.via_cluster else OperationFailed
            raise err(
                f"benchmark failed: {exc}",
                "run `spark-tui smoke` against the same server to see which part fails",
            ) from exc
        return target


def _report(
    args: argparse.Namespace, history: History, bench: BenchRun, target: Target | None
) -> None:
    run_id = None
    try:
        rec = history.record_bench(
            bench.result,
            launch=target.launch if target else None,
            base_url=bench.result.base_url,
        )
        run_id = rec.id
    except OSError as exc:
        print(f"spark-tui: could not record the run in {history.root}: {exc}", file=sys.stderr)
    if args.json:
        print(json.dumps({"run_id": run_id, **bench.result.to_dict()}, indent=2))
        return
    print(f"model {bench.result.model} at {bench.result.base_url}")
    for note in bench.result.notes:
        print(f"note: {note}")
    print(format_table(bench.result))
    state = " (cancelled: partial results)" if bench.result.cancelled else ""
    print(f"recorded as run {run_id}{state}" if run_id else state.strip())


def run(args: argparse.Namespace) -> int:
    history = History()
    holder: list[BenchRun] = []
    try:
        target = run_command(lambda: _run(args, history, holder))
    except KeyboardInterrupt as exc:
        # The signal cancelled the sweep: in-flight requests are closed; keep what finished.
        if holder:
            holder[0].result.cancelled = True
            sys.stderr.write("\nspark-tui: benchmark interrupted\n")
            _report(args, history, holder[0], None)
        return int(getattr(exc, "exit_code", 130))
    bench = holder[0]
    _report(args, history, bench, target)
    errors = sum(lv.errors for lv in bench.result.levels)
    return EXIT_OK if errors == 0 else EXIT_FAILED

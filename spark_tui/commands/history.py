"""`spark-tui history`: list runs, compare two benchmarks, export a script and a report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spark_tui.core.errors import EXIT_OK, InputError
from spark_tui.ops.compare import compare_bench
from spark_tui.ops.export import export_runs, masked_dict
from spark_tui.ops.history import History, Run


def bench_run(history: History, run_id: str) -> Run:
    """The benchmark named by the id: the run itself, or the last benchmark of a launch."""
    run = history.get_run(run_id)
    if run.kind == "bench":
        return run
    if run.kind == "launch":
        benches = [r for r in history.list_runs("bench") if r.launch_id == run.id]
        if benches:
            return benches[-1]
    raise InputError(
        f"run {run.id} is a {run.kind} run with no benchmark",
        "compare benchmark runs (kind bench in `spark-tui history`)",
    )


def run(args: argparse.Namespace) -> int:
    history = History()
    action = args.action or "list"
    if action == "list":
        runs = history.list_runs()
        if args.json:
            print(json.dumps([masked_dict(r) for r in runs], indent=2))
            return EXIT_OK
        if not runs:
            print(f"no runs recorded yet in {history.root}")
            return EXIT_OK
        for r in runs:
            changed = ", ".join(f"{c['name']}={c['after']}" for c in r.changed)
            ok = {True: "ok", False: "FAIL", None: "-"}[r.ok]
            print(
                f"{r.id}  {r.kind:<6} {r.time[:19]}  {r.recipe or '-':<22} {ok:<4} "
                f"{r.summary()}" + (f"  [changed {changed}]" if changed else "")
            )
        return EXIT_OK
    if action == "compare":
        if len(args.runs) != 2:
            raise InputError(
                "compare takes two run ids", "spark-tui history compare BASELINE_ID RUN_ID"
            )
        a, b = (bench_run(history, rid) for rid in args.runs)
        repeats = [r for r in history.repeats_of(a) if r.id not in (a.id, b.id)]
        cmp = compare_bench(a, b, repeats)
        print(json.dumps(cmp.to_dict(), indent=2) if args.json else cmp.to_text())
        return EXIT_OK
    if action == "export":
        if not args.runs or len(args.runs) > 2:
            raise InputError(
                "export takes one or two run ids", "spark-tui history export A [B] --out DIR"
            )
        if not args.out:
            raise InputError("export needs --out DIR", "pass --out DIR for the script and report")
        paths = export_runs(history, args.runs, Path(args.out))
        if args.json:
            print(json.dumps([str(p) for p in paths]))
        else:
            for p in paths:
                print(p)
        return EXIT_OK
    raise InputError(f"unknown history action {action!r}", "use list, compare or export")

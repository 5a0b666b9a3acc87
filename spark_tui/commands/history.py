"""`spark-tui history`: list runs (failed ones too), compare two benchmarks, export a script
and a report, pick or reset the baseline tuning compares with."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spark_tui.core.errors import EXIT_OK, InputError
from spark_tui.ops.compare import compare_bench
from spark_tui.ops.export import export_runs, masked_dict
from spark_tui.ops.history import History

OUTCOME = {True: "ok", False: "FAIL", None: "-"}


def run(args: argparse.Namespace) -> int:
    history = History()
    action = args.action
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
            print(
                f"{r.id}  {r.kind:<6} {r.time[:19]}  {r.recipe or '-':<22} {OUTCOME[r.ok]:<4} "
                f"{r.summary()}" + (f"  [changed {changed}]" if changed else "")
            )
        return EXIT_OK
    if action == "compare":
        if len(args.runs) != 2:
            raise InputError(
                "compare takes two run ids", "spark-tui history compare BASELINE_ID RUN_ID"
            )
        a, b = (history.bench_of(rid) for rid in args.runs)
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
    if action == "baseline":
        return _baseline(history, args)
    raise InputError(f"unknown history action {action!r}", "use list, compare, export or baseline")


def _baseline(history: History, args: argparse.Namespace) -> int:
    if args.reset:
        gone = history.reset_baseline(args.reset)
        if args.json:
            print(json.dumps({"recipe": args.reset, "reset": gone}))
        else:
            picked = ", ".join(gone) or "none was picked"
            print(
                f"{args.reset}: baseline reset ({picked}); the next tuning step measures a new one"
            )
        return EXIT_OK
    if len(args.runs) != 1:
        raise InputError(
            "baseline takes one run id", "spark-tui history baseline RUN_ID (or --reset RECIPE)"
        )
    run = history.pin_baseline(args.runs[0])
    if args.json:
        print(json.dumps({"baseline": run.id, "recipe": run.recipe, "cluster": run.cluster_key}))
    else:
        print(f"{run.id} is the baseline of {run.recipe} on {run.cluster_key}")
    return EXIT_OK

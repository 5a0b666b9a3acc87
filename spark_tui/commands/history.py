"""`spark-tui history`: list runs (failed ones too), show one, compare two benchmarks,
export a script and a report, pick or reset the baseline tuning compares with; `--demo`
reads the demo's own history (simulated Sparks). The actions are `service.history`'s."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from spark_tui.core.errors import EXIT_OK, InputError
from spark_tui.service.history import RunHistory

if TYPE_CHECKING:
    from spark_tui.service.history import Run


def run(args: argparse.Namespace) -> int:
    history = RunHistory.demo() if getattr(args, "demo_history", False) else RunHistory()
    action = args.action
    if action == "list":
        if args.json:
            print(json.dumps(history.runs_json(), indent=2))
            return EXIT_OK
        rows = history.rows()
        if not rows:
            print(f"no runs recorded yet in {history.root}")
        for row in rows:
            print("\n".join(row.lines()))
        return EXIT_OK
    if action == "show":
        if len(args.runs) != 1:
            raise InputError("show takes one run id", "spark-tui history show RUN_ID")
        detail = history.show(args.runs[0])
        if args.json:
            print(json.dumps(detail.to_dict(), indent=2))
        else:
            print("\n".join([detail.headline(), *_figures(detail.run), *detail.lines()]))
            if detail.comparison is not None:
                print(detail.comparison.to_text())
        return EXIT_OK
    if action == "compare":
        if len(args.runs) != 2:
            raise InputError(
                "compare takes two run ids", "spark-tui history compare BASELINE_ID RUN_ID"
            )
        cmp = history.compare(*args.runs)
        print(json.dumps(cmp.to_dict(), indent=2) if args.json else cmp.to_text())
        return EXIT_OK
    if action == "export":
        if not args.out:
            raise InputError("export needs --out DIR", "pass --out DIR for the script and report")
        paths = history.export(args.runs, Path(args.out))
        if args.json:
            print(json.dumps([str(p) for p in paths]))
        else:
            for p in paths:
                print(p)
        return EXIT_OK
    if action == "baseline":
        return _baseline(history, args)
    raise InputError(
        f"unknown history action {action!r}", "use list, show, compare, export or baseline"
    )


def _figures(run: Run) -> list[str]:
    """What a benchmark measured (its table, as `bench` printed it) or a sweep's table: what
    `history show` is asked for, not only its one-line summary."""
    if run.kind == "bench" and run.results.get("bench"):
        from spark_tui.commands.bench import format_table
        from spark_tui.service.bench import BenchResult

        result = BenchResult.from_dict(run.results["bench"])
        return [f"workload: {result.config.workload.summary()}", format_table(result)]
    if run.kind == "sweep" and run.results.get("sweep"):
        from spark_tui.core.sweep_result import SweepResult

        return [SweepResult.from_dict(run.results["sweep"]).text()]
    return []


def _baseline(history: RunHistory, args: argparse.Namespace) -> int:
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

"""`spark-tui tune RECIPE --set K=V (--inventory FILE | --hosts ...) [--baseline RUN |
--new-baseline] [--json]`: one changed setting on the running cluster, measured against
the baseline (`spark_tui.service.tune`). Exit 1 when the relaunch or its smoke checks fail.
With `--sweep K=V1,V2,...` each value in turn (`spark_tui.commands.sweep`)."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from spark_tui.core.errors import EXIT_OK, InputError, SparkError


async def _tune(args: argparse.Namespace) -> int:
    from spark_tui.commands.terminal import consume, err, session, show, targets
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.service import events as ev
    from spark_tui.service.evaluate import parse_sets

    if args.sweep:
        from spark_tui.commands.sweep import run_sweep

        return await run_sweep(args)
    for flag in ("targets", "maximize", "minimize", "resume", "apply_best", "on_interrupt"):
        if getattr(args, flag):
            name = "--" + flag.rstrip("s").replace("_", "-")
            raise InputError(f"{name} goes with --sweep", "add --sweep KEY=V1,V2,... or drop it")
    change = parse_sets(args.sets)
    if len(change) != 1:
        raise InputError(
            f"tune changes one setting at a time, not {len(change)}",
            "pass exactly one --set KEY=VALUE (earlier changes: `spark-tui launch --set`)",
        )
    ((key, value),) = change.items()
    from spark_tui.commands.bench import bench_config

    recipe = find_recipe(args.recipe)
    s = session(args, bench_config=bench_config(args))
    compared: list[ev.Compared] = []
    smoke: list[Any] = []
    stopped: list[str] = []  # the running cluster, once the tune stopped it to relaunch

    def on_event(event: ev.TuneEvent) -> None:
        if isinstance(event, ev.Stopped) and event.cluster_id:
            stopped.append(event.cluster_id)
        if isinstance(event, ev.Compared):
            compared.append(event)
        elif isinstance(event, ev.SmokeChecked):
            # Said as they come (a failed check ends the tune), and again in the result.
            smoke.append(event.result)
            err(f"smoke: {event.result.summary()}")
        else:
            show(event)

    try:
        await consume(
            s.tune(
                recipe,
                key,
                value,
                baseline=args.baseline,
                new_baseline=args.new_baseline,
                follow=False,
            ),
            flags={ev.REPLACE_STALE: None, ev.INSIST: True if args.force else None},
            on_event=on_event,
        )
    except (asyncio.CancelledError, SparkError) as exc:
        if stopped and not (s.cluster is not None and s.cluster.ready):
            # Interrupted or failed between the stop and the relaunch's ready: the relaunch
            # removed what it started, so the service the user had is gone; say so, and how
            # to bring it back.
            again = targets(args).command("launch", recipe.name, "--wait", live=True)
            gone = (
                f"the tune had stopped cluster {stopped[0]} to relaunch it with {key}={value}, "
                f"so nothing of it runs now; start it again with `{again}` and the --set it "
                "ran with (`spark-tui history` lists its launch)"
            )
            if isinstance(exc, SparkError):
                exc.remedy = f"{exc.remedy}; {gone}"
            else:
                err(f"interrupted: {gone}")
        raise
    finally:
        await s.close()
    done = compared[-1]
    if args.json:
        out = {
            **done.comparison.to_dict(),
            "notes": list(done.notes),
            "smoke_ok": done.smoke_ok,
            "smoke": [r.to_dict() for r in smoke],
            "ranks_carrying": list(done.ranks_carrying),
        }
        print(json.dumps(out, indent=2))
    else:
        ranks = ", ".join(map(str, done.ranks_carrying))
        print(f"every rank carries {key}={value} (ranks {ranks})")
        passed = sum(1 for r in smoke if r.ok)
        print(f"smoke after the change: {passed}/{len(smoke)} checks passed")
        for r in smoke:
            print(f"  {r.summary()}")
            if not r.ok and r.remedy:
                print(f"    remedy: {r.remedy}")
        print(done.comparison.to_text())
        for note in done.notes[len(done.comparison.notes) :]:
            print(f"note: {note}")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from spark_tui.commands.interrupts import run_command

    return int(run_command(lambda: _tune(args)))

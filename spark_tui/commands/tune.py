"""`spark-tui tune RECIPE --set K=V (--inventory FILE | --hosts ...) [--baseline RUN |
--new-baseline] [--json]`: one changed setting on the running cluster, measured against
the baseline (`spark_tui.service.tune`). Exit 1 when the relaunch or its smoke checks fail.
With `--sweep K=V1,V2,...` each value in turn (`spark_tui.commands.sweep`).

A change the checks refuse leaves the running cluster as it was. A relaunch that fails
brings the settings it replaced back (asked on a terminal; yes without one), unless
`--keep-failed` keeps the failed ranks; Ctrl+C during it asks the same (`--on-interrupt
baseline|nothing` answers without a terminal)."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import EXIT_OK, InputError, SparkError

if TYPE_CHECKING:
    from collections.abc import Callable

    from spark_tui.core.recipe import Recipe
    from spark_tui.service import events as ev
    from spark_tui.service.session import Session


async def _tune(args: argparse.Namespace) -> int:
    from spark_tui.commands.terminal import consume, err, session, show
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.service import events as ev
    from spark_tui.service.evaluate import parse_sets

    if args.sweep:
        from spark_tui.commands.sweep import run_sweep

        return await run_sweep(args)
    for flag in ("targets", "maximize", "minimize", "resume", "apply_best"):
        if getattr(args, flag):
            name = "--" + flag.rstrip("s").replace("_", "-")
            raise InputError(f"{name} goes with --sweep", "add --sweep KEY=V1,V2,... or drop it")
    if args.on_interrupt == "best":
        raise InputError(
            "--on-interrupt best goes with --sweep",
            "a plain tune leaves the baseline (or nothing) running: --on-interrupt baseline",
        )
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
    replaced: list[ev.TuneReplaced] = []  # the running cluster, once stopped to relaunch
    restored: list[ev.TuneRestored] = []

    def on_event(event: ev.TuneEvent) -> None:
        if isinstance(event, ev.TuneReplaced):
            replaced.append(event)
        elif isinstance(event, ev.TuneRestored):
            restored.append(event)
            err(
                f"cluster {event.cluster_id} runs the settings it ran with before "
                f"{event.change} again"
            )
        elif isinstance(event, ev.Compared):
            compared.append(event)
        elif isinstance(event, ev.SmokeChecked):
            # Said as they come (a failed check ends the tune), and again in the result.
            smoke.append(event.result)
            err(f"smoke: {event.result.summary()}")
        else:
            show(event)

    flags = {ev.REPLACE_STALE: None, ev.INSIST: True if args.force else None, ev.RESTORE: None}
    try:
        try:
            await consume(
                s.tune(
                    recipe,
                    key,
                    value,
                    baseline=args.baseline,
                    new_baseline=args.new_baseline,
                    follow=False,
                    keep_failed=args.keep_failed,
                ),
                flags=flags,
                on_event=on_event,
            )
        except asyncio.CancelledError:
            if replaced and not compared:
                await _after_interrupt(args, s, recipe, replaced[-1], flags, on_event)
            raise
        except SparkError as exc:
            if replaced and not restored:
                exc.remedy = f"{exc.remedy} (`{_launch_again(args, replaced[-1])}`)"
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


def _launch_again(args: argparse.Namespace, replaced: ev.TuneReplaced) -> str:
    """The launch that starts the replaced cluster again, on the same nodes."""
    from spark_tui.commands.terminal import targets

    sets = [w for k, v in replaced.overrides.items() for w in ("--set", f"{k}={v}")]
    return targets(args).command("launch", replaced.recipe, "--wait", *sets, live=True)


async def _after_interrupt(
    args: argparse.Namespace,
    s: Session,
    recipe: Recipe,
    replaced: ev.TuneReplaced,
    flags: dict[str, bool | None],
    on_event: Callable[[ev.TuneEvent], None],
) -> None:
    """Ctrl+C after the running cluster was stopped: the settings it ran with relaunched
    (asked; `--on-interrupt` answers without a terminal), or said how to; the interrupt then
    ends the command (exit 130)."""
    from spark_tui.commands.sweep import interrupt_choice
    from spark_tui.commands.terminal import consume, err

    task = asyncio.current_task()
    if task is not None:
        task.uncancel()  # the relaunch below awaits; a second Ctrl+C cancels it again
    choice = interrupt_choice(
        args,
        f"tune interrupted: relaunch the settings cluster {replaced.cluster_id} ran with "
        "before (baseline), or leave nothing running",
        ("baseline", "nothing"),
    )
    if choice == "baseline":
        await consume(s.restore_after_tune(recipe, replaced, "interrupted"), flags, on_event)
        return
    err(
        f"interrupted: the tune had stopped cluster {replaced.cluster_id} to relaunch it with "
        f"{replaced.change}, so nothing of it runs now; start it again with "
        f"`{_launch_again(args, replaced)}`"
    )


def run(args: argparse.Namespace) -> int:
    from spark_tui.commands.interrupts import run_command

    return int(run_command(lambda: _tune(args)))

"""`spark-tui tune RECIPE --sweep KEY=V1,V2,... [--target FIG<=X@cN]... [--maximize FIG@cN]
[--resume] [--apply-best] [--json]`: each value measured against one baseline
(`spark_tui.service.sweep`). Exit 0 when a value meets the targets, 1 when none does.

Ctrl+C ends the sweep after asking what to leave running (the best value so far, the
baseline's settings, nothing; `--on-interrupt` answers without a terminal)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK, InputError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from spark_tui.core.recipe import Recipe
    from spark_tui.core.sweep import Objective, Target
    from spark_tui.core.sweep_result import SweepResult
    from spark_tui.service import events as ev
    from spark_tui.service.session import Session


def parse_goal(args: argparse.Namespace) -> tuple[list[Target], Objective | None]:
    """The targets and the objective the flags give (InputError for one that cannot be read)."""
    from spark_tui.core.sweep import Objective, Target

    targets = [Target.parse(t) for t in args.targets]
    objective = None
    if args.maximize:
        objective = Objective.parse(args.maximize, maximize=True)
    elif args.minimize:
        objective = Objective.parse(args.minimize, maximize=False)
    return targets, objective


def _progress(event: ev.SweepProgressed) -> str:
    eta = "" if event.eta_s is None else f", about {event.eta_s / 60:.0f} min left"
    if event.eta_s is not None and event.eta_s < 120:
        eta = f", about {event.eta_s:.0f} s left"
    what = "" if event.value is None else f" value {event.value}:"
    return f"sweep {event.done}/{event.total} done,{what} {event.phase}{eta}"


def resume_command(args: argparse.Namespace) -> str:
    """The command as typed, with --resume: the same nodes, cluster, targets and benchmark
    settings (a resume that drops them is another sweep, or judged by other targets)."""
    import shlex

    argv = list(getattr(args, "argv", None) or ["tune", args.recipe, "--sweep", args.sweep])
    if "--resume" not in argv:
        argv.append("--resume")
    return "spark-tui " + shlex.join(argv)


def interrupt_choice(args: argparse.Namespace, question: str, choices: Sequence[str]) -> str:
    """What to leave running after Ctrl+C: `--on-interrupt`'s answer, else asked on a
    terminal (`question`), else the baseline's settings (the service as it was before)."""
    if args.on_interrupt:
        return str(args.on_interrupt)
    if not sys.stdin.isatty():
        return "baseline"
    sys.stderr.write(f"\n{question}? [{'/'.join(choices)}] (baseline) ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer if answer in choices else "baseline"


async def run_sweep(args: argparse.Namespace) -> int:
    from spark_tui.commands.bench import bench_config
    from spark_tui.commands.terminal import consume, err, session, show
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.core.sweep import parse_sweep
    from spark_tui.service import events as ev

    if args.sets:
        raise InputError(
            "--sweep and --set both given",
            "a sweep changes one setting through its values: drop --set (launch with it "
            "first: `spark-tui launch --set`)",
        )
    setting, values = parse_sweep(args.sweep)
    targets, objective = parse_goal(args)
    recipe = find_recipe(args.recipe)
    s = session(args, bench_config=bench_config(args))
    kept: list[SweepResult] = []
    done: list[SweepResult] = []

    def on_event(event: ev.SweepEvent) -> None:
        if isinstance(event, ev.SweepProgressed):
            err(_progress(event))
        elif isinstance(event, ev.SweepValueDone):
            row = next(r for r in event.result.rows if r.value == event.value)
            verdict = row.verdict(event.result.targets, event.result.objective)
            err(f"{event.result.setting}={event.value}: {verdict.text()}")
        elif isinstance(event, ev.SweepDone):
            done.append(event.result)
        elif isinstance(event, ev.SmokeChecked):
            err(f"smoke: {event.result.summary()}")
        else:
            show(event)

    flags = {ev.REPLACE_STALE: True, ev.INSIST: True if args.force else None}
    try:
        try:
            await consume(
                s.sweep(
                    recipe,
                    setting,
                    values,
                    targets,
                    objective,
                    resume=args.resume,
                    apply_best=args.apply_best,
                    baseline=args.baseline,
                    new_baseline=args.new_baseline,
                    on_result=kept.append,
                ),
                flags=flags,
                on_event=on_event,
            )
        except asyncio.CancelledError:
            if not kept or done:
                raise
            await _after_interrupt(args, s, recipe, kept[-1], flags, on_event)
            raise
    finally:
        await s.close()
    result = done[-1]
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        print(result.text())
    return EXIT_OK if result.best() is not None else EXIT_FAILED


async def _after_interrupt(
    args: argparse.Namespace,
    s: Session,
    recipe: Recipe,
    result: SweepResult,
    flags: dict[str, bool | None],
    on_event: Callable[[ev.SweepEvent], None],
) -> None:
    """Say what was measured, ask what to leave running, leave it; the interrupt then ends
    the command (exit 130). `--resume` continues the sweep later."""
    from spark_tui.commands.terminal import consume, err

    task = asyncio.current_task()
    if task is not None:
        task.uncancel()  # the clean-up below awaits; a second Ctrl+C cancels it again
    result.interrupted = True
    err(result.text())
    err(f"resume with: {resume_command(args)}")
    choice = interrupt_choice(
        args,
        "sweep interrupted: leave running the best value so far, the baseline, or nothing",
        ("best", "baseline", "nothing"),
    )
    await consume(s.leave_after_sweep(recipe, result, choice), flags=flags, on_event=on_event)

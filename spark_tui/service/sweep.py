"""A sweep of one setting, the one path for both interfaces: the baseline measured (or
picked) once, then for each value what a tune step does (the same change on every rank,
relaunch, check every rank runs it, smoke, the baseline's benchmark), each value marked as
meeting the targets or not, and the best one named (`core.sweep`, `core.sweep_result`).

A value that does not start (vLLM refuses it, out of memory, the fit check says no) is a
row with its reason and the ranks' last lines, and the sweep goes on; one the fit check
refuses is never launched, and the cluster running before it goes on serving. Each value's launch,
smoke run and benchmark are in the history like any tune step; the sweep's own record
(kind `sweep`) is updated after each value, which is what `resume` continues from.

At the end (or after an interrupt, through `leave`) one of three is left running: the best
value (made the baseline), the baseline's settings, or nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import InputError, LaunchFailed, OperationFailed, SparkError
from spark_tui.core.sweep_result import FAILED, MEASURED, NOT_STARTED, ROW_LINES, SweepRow
from spark_tui.service import events as ev
from spark_tui.service.api import find_target
from spark_tui.service.bench import run_bench
from spark_tui.service.relaunch import relaunch_settings, relaunched, runs_settings
from spark_tui.service.smoke import run_smoke
from spark_tui.service.stop import stop_all
from spark_tui.service.tune import adopt_running_recipe, check_every_rank, pick_baseline

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.core.sweep import Eta, Objective, Target
    from spark_tui.core.sweep_result import SweepResult
    from spark_tui.ops.bench import BenchConfig
    from spark_tui.ops.history import Run
    from spark_tui.service.pump import Ask, Emit
    from spark_tui.service.session import Session

# What a sweep leaves running when it ends or is interrupted.
LEAVE_BEST = "best"
LEAVE_BASELINE = "baseline"
LEAVE_NOTHING = "nothing"
LEAVE_CHOICES = (LEAVE_BEST, LEAVE_BASELINE, LEAVE_NOTHING)


def typed_values(
    recipe: Recipe, overrides: dict[str, Any], setting: str, raws: Sequence[str]
) -> list[Any]:
    """Each value as the recipe's settings type it (InputError for one it refuses, and for
    two values that are the same setting)."""
    from spark_tui.core.overrides import apply_overrides

    typed = [apply_overrides(recipe, {**overrides, setting: raw}).get(setting) for raw in raws]
    seen: dict[str, str] = {}
    for raw, value in zip(raws, typed, strict=True):
        key = repr(value)
        if key in seen:
            raise InputError(
                f"--sweep gives {setting}={value!r} twice ({seen[key]} and {raw})",
                "list each value once",
            )
        seen[key] = raw
    return typed


def _resumable(session: Session, fresh: SweepResult, judge_anew: bool) -> SweepResult | None:
    """The latest unfinished record of this same sweep, if any. `judge_anew`: the resumed
    run gave targets or an objective of its own, which then judge every value; without,
    the sweep keeps its own (a resume that names none must not drop them and pass values
    the interrupted sweep failed)."""
    from spark_tui.core.sweep_result import SweepResult

    for run in reversed(session.history.list_runs("sweep")):
        data = run.results.get("sweep") or {}
        try:
            old = SweepResult.from_dict(data)
        except (KeyError, TypeError, ValueError):
            continue
        if old.same_sweep(fresh) and not old.done:
            old.run_id = run.id
            if judge_anew:
                old.targets, old.objective = fresh.targets, fresh.objective
            return old
    return None


def _save(session: Session, result: SweepResult, launch_run: Run | None) -> None:
    """The sweep's record, created or brought up to date (a history that cannot be written
    does not end the sweep: its rows are still shown)."""
    with contextlib.suppress(OSError, SparkError):
        run = session.history.record_sweep(
            result.to_dict(), launch=launch_run, run_id=result.run_id
        )
        result.run_id = run.id


async def sweep(
    session: Session,
    emit: Emit[ev.SweepEvent],
    ask: Ask,
    recipe: Recipe,
    setting: str,
    raws: Sequence[str],
    targets: Sequence[Target],
    objective: Objective | None,
    *,
    resume: bool = False,
    leave_at_end: str = LEAVE_BASELINE,
    baseline: str | None = None,
    new_baseline: bool = False,
    on_result: Callable[[SweepResult], None] | None = None,
) -> None:
    """The sweep action (see module doc). `objective` None: total tokens/s at the targets'
    level (a resumed sweep: its own targets and objective when neither is given). `on_result`
    gets the result as soon as it exists (an interface keeps it to offer `leave` after an
    interrupt)."""
    from spark_tui.core.sweep import default_objective
    from spark_tui.core.sweep_result import SweepResult
    from spark_tui.ops.bench import BenchConfig

    cluster, overrides = await adopt_running_recipe(session, recipe, "sweep")
    overrides.pop(setting, None)  # the setting swept is each value's, not the running one
    values = typed_values(recipe, overrides, setting, raws)
    launch_run = cluster.launch_run
    cluster_key = launch_run.cluster_key if launch_run else None
    fresh = SweepResult(
        recipe=recipe.name,
        setting=setting,
        raws=list(raws),
        values=values,
        targets=list(targets),
        objective=objective or default_objective(targets),
        overrides=overrides,
        cluster_key=cluster_key,
    )
    judge_anew = bool(targets) or objective is not None
    result = (_resumable(session, fresh, judge_anew) if resume else None) or fresh
    if resume and result is fresh:
        emit(ev.Notice("info", "no unfinished sweep like this one: starting it afresh"))
    elif resume:
        emit(
            ev.Notice(
                "info",
                f"resuming sweep {result.run_id}: {len(result.rows)} of {len(raws)} values "
                "already measured"
                + ("" if judge_anew else f"; judged as before: {result.goal_text()}"),
            )
        )
    result.interrupted = False
    if on_result is not None:
        on_result(result)

    base = await _baseline(session, emit, recipe, result, baseline, new_baseline)
    result.baseline_id = base.id
    result.baseline_value = _setting_of(base, setting, recipe)
    _save(session, result, launch_run)
    config = BenchConfig.from_dict((base.results.get("bench") or {}).get("config") or {})

    from spark_tui.core.sweep import Eta

    eta = Eta([r.seconds for r in result.rows if r.seconds > 0])
    try:
        for index in result.left():
            raw, value = result.raws[index], result.values[index]
            done = len(result.rows)

            phase = _Phases(emit, eta, done, len(raws), value)

            if value == result.baseline_value:
                row = _baseline_row(base, raw, value)
            else:
                row = await _measure(
                    session, emit, ask, recipe, result, raw, value, config, base, phase
                )
            if row.seconds > 0:
                eta.durations.append(row.seconds)
            result.rows.append(row)
            _save(session, result, launch_run)
            emit(ev.SweepValueDone(result, value))
    except asyncio.CancelledError:
        result.interrupted = True
        _save(session, result, launch_run)
        raise
    result.done = True
    _save(session, result, launch_run)
    emit(ev.SweepDone(result))
    await leave(session, emit, ask, recipe, result, leave_at_end)


class _Phases:
    """Says each phase of one value as a SweepProgressed, with the time left."""

    def __init__(
        self, emit: Emit[ev.SweepEvent], eta: Eta, done: int, total: int, value: Any
    ) -> None:
        self.emit, self.eta, self.done, self.total, self.value = emit, eta, done, total, value
        self.start = time.monotonic()

    def __call__(self, name: str) -> None:
        left = self.eta.left(self.total - self.done, time.monotonic() - self.start)
        self.emit(ev.SweepProgressed(self.done, self.total, self.value, name, left))


def _setting_of(run: Run, setting: str, recipe: Recipe) -> Any:
    """The value the baseline's benchmark ran with (typed as the recipe types it)."""
    from spark_tui.core.overrides import apply_overrides

    if setting in run.settings:
        return run.settings[setting]
    with contextlib.suppress(SparkError):
        return apply_overrides(recipe, dict(run.overrides)).get(setting)
    return None


async def _baseline(
    session: Session,
    emit: Emit[ev.SweepEvent],
    recipe: Recipe,
    result: SweepResult,
    chosen: str | None,
    new_baseline: bool,
) -> Run:
    """The baseline, once for the whole sweep: a resumed sweep's own, the picked one, the
    latest benchmark of the running settings, else measured now."""
    history = session.history
    if result.baseline_id:
        with contextlib.suppress(SparkError):
            run = history.get_run(result.baseline_id)
            emit(ev.Notice("info", f"baseline: benchmark {run.id} (the sweep's own)"))
            return run
    cluster = session.cluster
    launch_run = cluster.launch_run if cluster else None
    base = pick_baseline(
        history,
        recipe.name,
        launch_run.cluster_key if launch_run else None,
        launch_run.settings_hash if launch_run else None,
        session.bench_config,
        chosen=chosen,
        new_baseline=new_baseline,
    )
    if base is not None:
        emit(ev.Notice("info", f"baseline: benchmark {base.id}"))
        return base
    emit(ev.SweepProgressed(0, len(result.raws), None, "baseline"))
    emit(ev.Notice("info", "measuring the baseline before the sweep"))
    target = await find_target(session, None, None)
    measured = await run_bench(session, emit, target, session.bench_config)
    if measured is None:
        raise OperationFailed(
            "the baseline benchmark could not be recorded in the history",
            "check that the history folder is writable, then try again",
        )
    return measured


def _baseline_row(base: Run, raw: str, value: Any) -> SweepRow:
    """The baseline's own value: its benchmark is the row (no relaunch to measure it)."""
    from spark_tui.core.sweep import levels_of

    return SweepRow(
        value=value,
        raw=raw,
        status=MEASURED,
        launch_id=base.launch_id,
        bench_id=base.id,
        levels=levels_of(base.results.get("bench")) or {},
        is_baseline=True,
    )


async def _measure(
    session: Session,
    emit: Emit[ev.SweepEvent],
    ask: Ask,
    recipe: Recipe,
    result: SweepResult,
    raw: str,
    value: Any,
    config: BenchConfig,
    base: Run,
    phase: Callable[[str], None],
) -> SweepRow:
    """One value as a tune step measures it; a value that does not start (or fails its
    checks) is a row with why, not an error."""
    from spark_tui.core.sweep import levels_of
    from spark_tui.ops.compare import compare_runs
    from spark_tui.service.history import RankTails

    started = time.monotonic()
    tails = RankTails(size=ROW_LINES)

    def seen(event: ev.SweepEvent) -> None:
        tails.see(event)
        emit(event)

    setting = result.setting
    row = SweepRow(value=value, raw=raw, status=NOT_STARTED)
    ready = False
    try:
        phase("relaunch")
        # The launch replaces the running cluster only once its fit check agrees: a value
        # the check refuses leaves the running one serving (its memory is counted free).
        emit(ev.Notice("info", f"relaunching with {setting}={raw}"))
        cluster = await relaunched(session, seen, ask, recipe, {**result.overrides, setting: raw})
        ready = True
        row.launch_id = cluster.launch_run.id if cluster.launch_run else None
        phase("check")
        carrying = await check_every_rank(session, cluster, setting, value)
        emit(ev.Notice("info", f"every rank carries {setting}={raw}: ranks {carrying}"))
        phase("smoke")
        target = await find_target(session, None, None)
        checks = {r.name: r.ok for r in await run_smoke(session, seen, target)}
        if not (checks.get("health") and checks.get("chat")):
            raise OperationFailed(
                f"with {setting}={raw} the service fails its smoke checks",
                "read the failed checks in the value's smoke run (`spark-tui history`)",
            )
        phase("bench")
        after = await run_bench(session, seen, target, config)
        if after is None:
            raise OperationFailed(
                "the benchmark could not be recorded", "check that the history folder is writable"
            )
        row.status, row.bench_id = MEASURED, after.id
        row.levels = levels_of(after.results.get("bench")) or {}
        comparison = compare_runs(session.history, base, after)
        conc = result.objective.level(row.levels)
        delta = comparison.get(conc, result.objective.figure) if conc is not None else None
        if delta is not None and delta.comparable:
            row.delta_pct, row.noise_pct = delta.delta_pct, delta.noise_pct
            row.noise_verdict = delta.verdict
    except SparkError as exc:
        row.status = FAILED if ready else NOT_STARTED
        row.reason, row.remedy = exc.message, exc.remedy
        lines = {f"rank {rank} {node}": list(tail) for (rank, node), tail in tails.lines.items()}
        if isinstance(exc, LaunchFailed) and exc.lines:
            lines[f"rank {exc.rank} {exc.node}"] = list(exc.lines)[-ROW_LINES:]
        row.rank_lines = {k: v for k, v in sorted(lines.items()) if v}
        emit(ev.Notice("warning", f"{setting}={raw} {row.status}: {exc.message}", exc.remedy))
    row.seconds = time.monotonic() - started
    return row


async def leave(
    session: Session,
    emit: Emit[ev.SweepEvent],
    ask: Ask,
    recipe: Recipe,
    result: SweepResult,
    choice: str,
) -> None:
    """Leave the best value (made the baseline), the baseline's settings or nothing
    running after a sweep; a value already running is not relaunched."""
    if choice not in LEAVE_CHOICES:
        raise InputError(
            f"cannot leave {choice!r} running", f"choose one of: {', '.join(LEAVE_CHOICES)}"
        )
    await session.connect(strict=True)
    running = session.cluster
    if choice == LEAVE_NOTHING:
        emit(ev.SweepProgressed(len(result.rows), len(result.raws), None, "leave"))
        if running is not None:  # only the sweep's own: a service beside it stays
            await stop_all(session, emit, running.cluster_id)
        emit(ev.Notice("info", "nothing of the sweep is left running"))
        return
    best = result.best() if choice == LEAVE_BEST else None
    if choice == LEAVE_BEST and best is None:
        emit(
            ev.Notice(
                "warning",
                f"{result.best_text()}: leaving the baseline's settings running instead",
                "loosen the targets or sweep other values",
            )
        )
    overrides = dict(result.overrides)
    if best is not None:
        overrides[result.setting] = best.raw
        label = f"{result.setting}={best.raw}"
    elif result.baseline_value is not None:
        overrides[result.setting] = result.baseline_value
        label = f"the baseline's {result.setting}={result.baseline_value}"
    else:
        label = "the baseline's settings"
    if not runs_settings(session, recipe, overrides):
        emit(ev.SweepProgressed(len(result.rows), len(result.raws), None, "leave"))
        emit(ev.Notice("info", f"leaving {label} running: relaunching"))
        await relaunch_settings(session, emit, ask, recipe, overrides)
    emit(ev.Notice("info", f"{label} is running"))
    if best is not None and best.bench_id:
        try:
            session.history.pin_baseline(best.bench_id)
        except (OSError, SparkError) as exc:
            emit(ev.Notice("warning", f"the best value was not made the baseline: {exc}"))
        else:
            emit(ev.Notice("info", f"benchmark {best.bench_id} is now the baseline"))


def load_result(session: Session, run_id: str) -> SweepResult:
    """A recorded sweep (to leave something running after an interrupt, or to show it)."""
    from spark_tui.core.sweep_result import SweepResult

    run = session.history.get_run(run_id)
    data = run.results.get("sweep")
    if run.kind != "sweep" or not data:
        raise InputError(f"run {run.id} is not a sweep", "pick a sweep run in `spark-tui history`")
    result = SweepResult.from_dict(data)
    result.run_id = run.id
    return result

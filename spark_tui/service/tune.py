"""Tuning, the one path for both interfaces: one changed setting, relaunch every rank,
check every rank carries the change, smoke, the baseline's exact benchmark settings,
compare with the baseline (and its notes).

The baseline is the run the user picked (`--baseline`, or pinned in the history), else
the latest benchmark of the running settings measured with this session's benchmark
settings, else one measured now, before the change. A baseline measured with other
benchmark settings is never compared figure by figure (see `ops.compare`).

The running cluster is replaced only once the change passed the checks a launch makes: a
change they refuse leaves it running. A relaunch that fails after it was stopped brings
the settings it ran with back (asked, yes by default), unless the failed ranks are kept
for inspection; an interrupted one leaves that to the interface (`restore`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import InputError, NoClusterError, OperationFailed, SparkError
from spark_tui.core.workload import comparable_config
from spark_tui.service import events as ev
from spark_tui.service.api import find_target
from spark_tui.service.attach import adopt, running
from spark_tui.service.bench import run_bench
from spark_tui.service.launch import LaunchOptions, launched_until_ready, vetted
from spark_tui.service.smoke import run_smoke
from spark_tui.service.stop import stop_all

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.ops.bench import BenchConfig
    from spark_tui.ops.history import History, Run
    from spark_tui.service.cluster import Cluster
    from spark_tui.service.pump import Ask, Emit
    from spark_tui.service.session import Session


def pick_baseline(
    history: History,
    recipe: str,
    cluster_key: str | None,
    settings_hash: str | None,
    config: BenchConfig,
    *,
    chosen: str | None = None,
    new_baseline: bool = False,
) -> Run | None:
    """The benchmark to compare with (see module doc); None: measure one first."""
    if chosen:
        return history.bench_of(chosen)
    if new_baseline:
        return None
    pinned = history.pinned_baseline(recipe, cluster_key)
    if pinned is not None:
        return pinned
    wanted = comparable_config(config.to_dict())
    for run in reversed(history.list_runs("bench")):
        same = (
            run.recipe == recipe
            and run.cluster_key == cluster_key
            and run.settings_hash == settings_hash
            and comparable_config((run.results.get("bench") or {}).get("config") or {}) == wanted
            and not (run.results.get("bench") or {}).get("cancelled")
        )
        if same:
            return run
    return None


async def adopt_running(session: Session) -> Cluster:
    """The running cluster to tune: the chosen one (`session.chosen`), ours, or the only
    one found on the nodes."""
    cluster = session.cluster
    ours = cluster is not None and session.chosen in (None, cluster.cluster_id)
    if cluster is None or not ours or not cluster.ready or not cluster.base_url:
        await session.connect(strict=True)
        found = await running(session)
        if found is None:
            ended = [c.cluster_id for c in await session.nodes.status() if not c.running]
            raise NoClusterError(session.where, ended)
        api = await session.nodes.find_api(found.cluster_id)
        head = found.ranks[0]
        argv = api.ranks[0].get("argv") if api.ranks else head.command
        cluster = adopt(session, found, [str(a) for a in argv or []])
        cluster.base_url = api.base_url
        cluster.ready = True
    if session.chosen is not None and session.on is None:
        # One of several side by side: its relaunches run where it runs, not on the first
        # nodes given (another service of ours may be there).
        session.on = [node for _rank, node in sorted(cluster.ranks)]
    return cluster


async def adopt_running_recipe(
    session: Session, recipe: Recipe, verb: str
) -> tuple[Cluster, dict[str, Any]]:
    """The running cluster of `recipe` to change (see `adopt_running`) and the settings it
    runs with; another recipe running is refused, saying which."""
    from spark_tui.service.evaluate import running_overrides

    cluster = await adopt_running(session)
    if cluster.recipe != recipe.name:
        raise InputError(
            f"the running cluster serves {cluster.recipe}, not {recipe.name}",
            f"{verb} {cluster.recipe}, or stop it and launch {recipe.name} first",
        )
    return cluster, dict(cluster.overrides) or running_overrides(recipe, cluster.head_argv)


def _wrong_ranks(ranks: list[tuple[int, list[str]]], setting: str, value: Any) -> list[int]:
    from spark_tui.ops.tuning import ranks_carry

    plan = {"ranks": [{"rank": rank, "argv": argv} for rank, argv in ranks]}
    return ranks_carry(plan, setting, value)


async def tune(
    session: Session,
    emit: Emit[ev.TuneEvent],
    ask: Ask,
    recipe: Recipe,
    setting: str,
    value: Any,
    *,
    baseline: str | None = None,
    new_baseline: bool = False,
    follow: bool = True,
    keep_failed: bool = False,
) -> None:
    """The tune action (see module doc). With `follow`, the relaunched cluster's events
    keep coming after the comparison, as after a launch. `keep_failed`: a failed rank's
    cluster is kept for inspection, so the settings it replaced are not relaunched over it."""
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.ops.bench import BenchConfig
    from spark_tui.ops.compare import compare_runs
    from spark_tui.ops.history import changed_settings

    cluster, old = await adopt_running_recipe(session, recipe, "tune")
    new = {**old, setting: value}
    before = apply_overrides(recipe, old).get(setting)
    typed = apply_overrides(recipe, new).get(setting)
    if before == typed:
        raise InputError(
            f"{setting} is already {before!r}", "pick another value: tuning measures one change"
        )
    # The checks a launch makes, before anything is measured or stopped: a change they
    # refuse costs neither a baseline benchmark (minutes) nor the running service.
    try:
        checked = await vetted(session, emit, ask, recipe, new)
    except SparkError as exc:
        exc.message = f"{exc.message}; {cluster.cluster_id} is still running, unchanged"
        raise
    # "Launch anyway" was answered yes: the relaunch does not ask again.
    insisting = True if checked.needs_insisting() else None
    history = session.history
    launch_run = cluster.launch_run
    cluster_key = launch_run.cluster_key if launch_run else None
    settings_hash = launch_run.settings_hash if launch_run else None
    base = pick_baseline(
        history,
        recipe.name,
        cluster_key,
        settings_hash,
        session.bench_config,
        chosen=baseline,
        new_baseline=new_baseline,
    )
    if base is None:
        emit(ev.Notice("info", "measuring the baseline before the change"))
        target = await find_target(session, None, None)
        base = await run_bench(session, emit, target, session.bench_config)
        if base is None:
            raise OperationFailed(
                "the baseline benchmark could not be recorded in the history",
                "check that the history folder is writable, then try again",
            )
    else:
        emit(ev.Notice("info", f"baseline: benchmark {base.id}"))
    # The rerun uses the baseline's own benchmark settings: like with like.
    config = BenchConfig.from_dict((base.results.get("bench") or {}).get("config") or {})
    # A workload file is read again now, before the cluster is stopped: a changed or missing
    # file is said while the running cluster is still there.
    config = dataclasses.replace(config, workload=config.workload.reloaded())

    change = f"{setting}={value}"
    replacing = Replacing(emit, cluster.cluster_id, recipe.name, old, change)
    emit(ev.Notice("info", f"relaunching {cluster.cluster_id} with {change}"))
    # The launch replaces the running cluster only once the change passed the checks a
    # launch makes (the fit counting the running cluster's memory as free, the image's
    # flags): a change they refuse leaves the service running.
    options = LaunchOptions(insist=insisting, follow=follow, replace=True, keep_failed=keep_failed)
    compared = False
    try:
        async with launched_until_ready(
            session, replacing, ask, recipe, new, options, f"the relaunch with {change}"
        ) as (relaunched, launching):
            if not replacing.stopped:
                # The change runs on other nodes (a layout of other size): the cluster it
                # replaces goes now that the change is up.
                await stop_all(session, replacing, cluster.cluster_id)
            carrying = await check_every_rank(session, relaunched, setting, typed)
            emit(ev.Notice("info", f"every rank carries {change}: ranks {carrying}"))
            target = await find_target(session, None, None)
            results = await run_smoke(session, emit, target)
            basic = {r.name: r.ok for r in results}
            if not (basic.get("health") and basic.get("chat")):
                raise OperationFailed(
                    f"after the change ({change}) the service fails its smoke checks",
                    "read the failed checks; change the setting back (or another value)",
                )
            after = await run_bench(session, emit, target, config)
            if after is None:
                raise OperationFailed(
                    "the benchmark after the change could not be recorded",
                    "check that the history folder is writable",
                )
            comparison = compare_runs(history, base, after)
            notes = list(comparison.notes)
            if relaunched.launch_run is not None:
                extra = [
                    c["name"]
                    for c in changed_settings(relaunched.launch_run, base)
                    if c["name"] != setting
                ]
                if extra:
                    notes.append(
                        "more than one setting differs from the baseline: " + ", ".join(extra)
                    )
            emit(
                ev.Compared(
                    base.id,
                    after.id,
                    comparison,
                    all(r.ok for r in results),
                    notes=tuple(notes),
                    ranks_carrying=tuple(carrying),
                )
            )
            compared = True
            if follow:
                await launching  # the cluster's logs keep coming until the consumer stops
    except SparkError as exc:
        if compared:
            raise  # a rank that failed later, while followed: the change was measured
        if not replacing.stopped:
            exc.message = f"{exc.message}; {cluster.cluster_id} is still running, unchanged"
            raise
        await _after_failure(session, replacing, ask, recipe, exc, keep_failed=keep_failed)
        raise


class Replacing:
    """A tune's events passed on, seeing when the cluster it replaces is stopped (then
    said as TuneReplaced, with the settings that bring it back)."""

    def __init__(
        self,
        emit: Emit[ev.TuneEvent],
        cluster_id: str,
        recipe: str,
        overrides: dict[str, Any],
        change: str,
    ) -> None:
        self.emit, self.cluster_id, self.change = emit, cluster_id, change
        self.replaced = ev.TuneReplaced(cluster_id, recipe, dict(overrides), change)
        self.stopped = False

    def __call__(self, event: ev.TuneEvent) -> None:
        self.emit(event)
        if isinstance(event, ev.Stopped) and event.cluster_id == self.cluster_id:
            if not self.stopped:
                self.stopped = True
                self.emit(self.replaced)


async def _after_failure(
    session: Session,
    replacing: Replacing,
    ask: Ask,
    recipe: Recipe,
    exc: SparkError,
    *,
    keep_failed: bool,
) -> None:
    """After the relaunch failed with the running cluster already stopped: the settings it
    replaced relaunched (asked; yes by default), unless the failed ranks are kept for
    inspection. What was done is added to `exc`'s remedy."""
    replaced = replacing.replaced
    before = settings_text(replaced.overrides)
    if keep_failed:
        replacing.emit(
            ev.Notice(
                "warning",
                f"the relaunch with {replaced.change} failed; its ranks are kept for "
                "inspection, so the settings it replaced are not relaunched over them",
                f"stop them, then launch with the settings it ran with ({before})",
            )
        )
        exc.remedy = (
            f"{exc.remedy}; the failed ranks are kept for inspection: stop them, then launch "
            f"with the settings {replaced.cluster_id} ran with ({before})"
        )
        return
    question = ev.Question(
        ev.RESTORE,
        "The relaunch failed",
        f"The relaunch with {replaced.change} failed: {exc.message}\n\n"
        f"Relaunch the settings {replaced.cluster_id} ran with before ({before}), so that "
        "the service is back?",
        default=True,
        yes_label="Relaunch them",
        data={"cluster": replaced.cluster_id, "overrides": dict(replaced.overrides)},
    )
    if not await ask(question):
        exc.remedy = (
            f"{exc.remedy}; nothing of {replaced.cluster_id} runs now: launch it with the "
            f"settings it ran with ({before})"
        )
        return
    try:
        back = await restore(
            session, replacing.emit, ask, recipe, replaced.overrides, replaced.change, exc.message
        )
    except SparkError as again:
        replacing.emit(
            ev.Notice(
                "warning",
                f"the settings the tune replaced could not be relaunched: {again.message}",
                again.remedy,
            )
        )
        exc.remedy = (
            f"{exc.remedy}; relaunching the settings {replaced.cluster_id} ran with failed "
            f"too, so nothing of it runs now: launch it with them ({before})"
        )
        return
    exc.remedy = (
        f"{exc.remedy}; the settings it ran with before run again (cluster {back.cluster_id})"
    )


async def restore(
    session: Session,
    emit: Emit[ev.TuneEvent],
    ask: Ask,
    recipe: Recipe,
    overrides: dict[str, Any],
    change: str,
    reason: str,
) -> Cluster:
    """The settings a tune replaced relaunched, after its relaunch with `change` failed or
    was interrupted (`reason`): what is left of that relaunch is stopped first. Said as
    TuneRestored."""
    from spark_tui.service.relaunch import relaunch_settings

    await session.connect(strict=True)
    emit(
        ev.Notice(
            "info",
            f"relaunching the settings before {change} ({settings_text(overrides)}): {reason}",
        )
    )
    # Asked like a launch when the fit check refuses them (they ran before, with --force).
    back = await relaunch_settings(session, emit, ask, recipe, dict(overrides), insist=None)
    emit(ev.TuneRestored(back.cluster_id, change, reason))
    return back


def settings_text(overrides: dict[str, Any]) -> str:
    """Settings as `--set` flags give them (the recipe's defaults when there are none)."""
    return " ".join(f"--set {k}={v}" for k, v in overrides.items()) or "the recipe's defaults"


async def check_every_rank(
    session: Session, cluster: Cluster, setting: str, value: Any
) -> list[int]:
    """Every rank's container runs with the change (as Docker reports its command):
    the ranks checked."""
    found = [c for c in await session.nodes.status() if c.cluster_id == cluster.cluster_id]
    ranks = [(r.rank, [str(a) for a in r.command]) for c in found for r in c.ranks if r.command]
    if not ranks and cluster.plan is not None:
        ranks = [(r.rank, list(r.argv)) for r in cluster.plan.ranks]
    wrong = _wrong_ranks(ranks, setting, value)
    if wrong or not ranks:
        raise OperationFailed(
            f"rank(s) {wrong or 'all'} do not carry {setting}={value}",
            "the same change must reach every rank: check the plan with `spark-tui plan`",
        )
    return sorted(rank for rank, _ in ranks)

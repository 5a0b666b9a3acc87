"""Tuning, the one path for both interfaces: one changed setting, relaunch every rank,
check every rank carries the change, smoke, the baseline's exact benchmark settings,
compare with the baseline (and its notes).

The baseline is the run the user picked (`--baseline`, or pinned in the history), else
the latest benchmark of the running settings measured with this session's benchmark
settings, else one measured now, before the change. A baseline measured with other
benchmark settings is never compared figure by figure (see `ops.compare`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import InputError, NoClusterError, OperationFailed
from spark_tui.core.workload import comparable_config
from spark_tui.service import events as ev
from spark_tui.service.api import find_target
from spark_tui.service.attach import adopt, running
from spark_tui.service.bench import run_bench
from spark_tui.service.launch import LaunchOptions, launched_until_ready
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
) -> None:
    """The tune action (see module doc). With `follow`, the relaunched cluster's events
    keep coming after the comparison, as after a launch."""
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

    emit(ev.Notice("info", f"stopping {cluster.cluster_id} to relaunch with {setting}={value}"))
    await stop_all(session, emit, cluster.cluster_id)

    async with launched_until_ready(
        session,
        emit,
        ask,
        recipe,
        new,
        LaunchOptions(follow=follow),
        f"the relaunch with {setting}={value}",
    ) as (relaunched, launching):
        carrying = await check_every_rank(session, relaunched, setting, typed)
        emit(ev.Notice("info", f"every rank carries {setting}={value}: ranks {carrying}"))
        target = await find_target(session, None, None)
        results = await run_smoke(session, emit, target)
        basic = {r.name: r.ok for r in results}
        if not (basic.get("health") and basic.get("chat")):
            raise OperationFailed(
                f"after the change ({setting}={value}) the service fails its smoke checks",
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
                notes.append("more than one setting differs from the baseline: " + ", ".join(extra))
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
        if follow:
            await launching  # the cluster's logs keep coming until the consumer stops


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

"""`spark-tui launch RECIPE (--inventory FILE | --hosts ...) [--set K=V]... [--wait]`.

Probes the nodes, runs the fit check (refuses a `does_not_fit` verdict unless --force),
builds the plan and starts one container per rank, head first. Without --wait it returns
once every rank has started; with --wait it follows the ranks until the API answers
/health (exit 0) or a rank fails (the others are stopped unless --keep-failed; exit 1).
Progress goes to stderr, the result to stdout. Ctrl+C or SIGTERM during the launch stops
and removes what it started.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from spark_tui.commands._interrupts import remove_after_interrupt, run_command, stop_command
from spark_tui.core.errors import EXIT_FAILED, EXIT_OK, OperationFailed
from spark_tui.ops.events import (
    ClusterReady,
    Event,
    LogLine,
    Notice,
    RankState,
    RankStateChanged,
    ResultEvent,
)

# Log lines worth showing while a headless launch runs (the rest: `spark-tui logs`).
_SHOWN_KINDS = ("error", "warning", "phase", "ready")


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def show_event(ev: Event) -> None:
    """One progress line on stderr for an event (log lines only when they matter)."""
    if isinstance(ev, RankStateChanged):
        extra = ""
        if ev.state is RankState.LOADING and ev.progress is not None:
            extra = f" {ev.progress:.0%}"
        if ev.reason:
            extra = f": {ev.reason}"
        _err(f"rank {ev.rank} {ev.node}: {ev.state.value}{extra}")
        for line in ev.explaining_lines:
            _err(f"    | {line}")
    elif isinstance(ev, LogLine):
        if ev.kind in _SHOWN_KINDS:
            _err(f"[{ev.rank} {ev.node}] {ev.text}")
    elif isinstance(ev, Notice):
        _err(f"{ev.level}: {ev.message}" + (f"\n  remedy: {ev.remedy}" if ev.remedy else ""))
    elif isinstance(ev, ClusterReady):
        _err(f"cluster {ev.cluster_id} is ready")


def _record(
    plan: Any,
    overrides: dict[str, Any],
    digests: dict[str, str],
    ok: bool | None,
    revision: str | None = None,
) -> None:
    """The run in the history (ops.history), with the user's --set values as overrides."""
    try:
        from spark_tui.ops.history import History
    except ImportError:
        return
    try:
        History().record_launch(
            plan, overrides=overrides, digests=digests, revision=revision, ok=ok
        )
    except (OSError, ValueError, TypeError) as exc:
        _err(f"warning: the launch was not recorded in the history: {exc}")


async def _launch(args: argparse.Namespace) -> int:
    from spark_tui.core.facts import cached_revision
    from spark_tui.core.fit import check_fit
    from spark_tui.core.model_facts import resolve_model_facts
    from spark_tui.core.overrides import apply_overrides, parse_set
    from spark_tui.core.plan import build_plan
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.core.render import render_argv, render_env
    from spark_tui.ops.cluster import status, stop
    from spark_tui.ops.launch import LaunchFailed, launch
    from spark_tui.remote.discovery import pool_from_args
    from spark_tui.remote.probe import probe_pool

    recipe = find_recipe(args.recipe)
    sets = list(getattr(args, "sets", None) or [])
    settings = apply_overrides(recipe, sets)
    overrides = {key: settings.get(key) for key, _ in map(parse_set, sets)}
    pool = pool_from_args(args)
    _err(f"connecting to {len(pool)} node(s)...")
    await pool.open()
    plan = None
    digests: dict[str, str] = {}
    try:
        # A cluster of ours already running holds memory the new launch needs: replace it
        # (with --replace) before the fit check, or refuse naming it.
        running = [c for c in await status(pool) if c.ranks]
        if running:
            names = ", ".join(f"{c.cluster_id} ({c.recipe})" for c in running)
            if not args.replace:
                raise OperationFailed(
                    f"spark-tui cluster {names} is already on these nodes",
                    "stop it first (`spark-tui stop` with the same --inventory/--hosts), "
                    "or pass --replace to stop it and launch this one",
                )
            _err(f"replacing {names}: stopping every rank first...")
            await stop(pool)
        facts = await probe_pool(pool)
        report = check_fit(
            recipe,
            render_argv(recipe, settings),
            render_env(recipe),
            facts,
            resolve_model_facts(recipe, facts),
            hf_token_set=bool(os.environ.get("HF_TOKEN")),
        )
        _err(f"fit: {report.verdict}")
        for f in report.findings:
            if f.severity in ("error", "warning"):
                _err(f"  {f.severity}: {f.message}\n    remedy: {f.remedy}")
        if report.verdict == "does_not_fit" and not args.force:
            raise OperationFailed(
                f"{recipe.name} does not fit these nodes (see the findings above)",
                "follow a finding's remedy, or pass --force to launch anyway",
            )
        plan = build_plan(recipe, settings, facts)
        _err(f"launching {plan.recipe} as cluster {plan.cluster_id} on {len(plan.ranks)} node(s)")

        async def yes(_stale: Any) -> bool:
            return True

        ready_url = None
        async for ev in launch(
            plan,
            pool,
            keep_failed=args.keep_failed,
            replace_stale=yes if args.replace else None,
            wait_ready=args.wait,
            follow=False,
            ready_timeout=args.ready_timeout,
        ):
            if isinstance(ev, ResultEvent) and ev.kind == "launch":
                digests = dict(ev.payload.get("image_digests") or {})
            if isinstance(ev, ClusterReady):
                ready_url = ev.base_url
            show_event(ev)
        revision = cached_revision(facts, recipe.model)
        _record(plan, overrides, digests, True if args.wait else None, revision)
        head = plan.head
        api = plan.endpoint
        if ready_url:
            print(f"cluster {plan.cluster_id} ready: {api['base_url']}")
        else:
            print(f"cluster {plan.cluster_id} started on {', '.join(r.node for r in plan.ranks)}")
            _err("follow it with `spark-tui logs --follow`; stop it with `spark-tui stop`")
        _err(
            f"from this machine: ssh -N -L {api['port']}:127.0.0.1:{api['port']} {head.address}"
            f"  then http://127.0.0.1:{api['port']}/v1"
        )
        return EXIT_OK
    except LaunchFailed as exc:
        if plan is not None:
            _record(plan, overrides, digests, False, cached_revision(facts, recipe.model))
        _err(f"spark-tui: {exc.message}")
        for line in exc.lines:
            _err(f"    | {line}")
        _err(f"  remedy: {exc.remedy}")
        return EXIT_FAILED
    except asyncio.CancelledError:
        # Ctrl+C / SIGTERM / SIGHUP: remove what this launch started (by its cluster label,
        # whatever phase it was in), or say exactly what is left.
        if plan is not None:
            await remove_after_interrupt(pool, plan.cluster_id, stop_command(args))
        raise
    finally:
        await pool.close()


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _launch(args))

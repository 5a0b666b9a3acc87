"""`spark-tui launch RECIPE (--inventory FILE | --hosts ...) [--set K=V]... [--wait]`.

Runs the session's launch (`spark_tui.service.session`): replaces a running cluster of
ours only with --replace, refuses a launch the fit check says no to unless --force,
starts one container per rank, head first. Without --wait it returns once every rank has
started; with --wait it follows the ranks until the API answers /health (exit 0) or a
rank fails (the others are stopped unless --keep-failed; exit 1). Progress goes to
stderr, the result to stdout. Ctrl+C or SIGTERM during the launch stops and removes what
it started.
"""

from __future__ import annotations

import argparse
import asyncio

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK, LaunchFailed


async def _launch(args: argparse.Namespace) -> int:
    from spark_tui.commands.interrupts import report_left
    from spark_tui.commands.terminal import consume, err, session, show, targets
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.service import events as ev

    recipe = find_recipe(args.recipe)
    s = session(args)
    err(f"connecting to {len(s.inventory)} node(s)...")

    said: list[tuple[str, str, str]] = []

    def on_event(event: ev.LaunchEvent) -> None:
        if isinstance(event, ev.Endpoint):
            # Once ready the endpoint comes again (with our forward's end, not shown here).
            where = (event.head, event.api_url, event.tunnel)
            if where in said:
                return
            if not said and s.cluster is not None:
                # The plan is made: from here on an interrupt has containers to remove.
                nodes = ", ".join(node for _rank, node in s.cluster.ranks)
                err(f"launching {recipe.name} as cluster {s.cluster.cluster_id} on {nodes}")
            said.append(where)
        show(event)

    try:
        seen = await consume(
            s.launch(
                recipe,
                dict(_sets(args.sets)),
                insist=args.force or None,
                replace=args.replace or None,
                wait_ready=args.wait,
                follow=False,
                keep_failed=args.keep_failed,
                ready_timeout=args.ready_timeout,
            ),
            # Without a terminal the defaults stand: no replacing, no insisting.
            flags={ev.REPLACE_STALE: True if args.replace else None, ev.INSIST: None},
            on_event=on_event,
        )
    except asyncio.CancelledError:
        # The launch removed what it started as its events stopped; check the nodes and
        # say what is left, if anything, with the command that removes it.
        if s.cluster is not None and not s.cluster.ready:
            cid = s.cluster.cluster_id
            remove = targets(args).command("stop", "--cluster", cid, live=True)
            await report_left(s, cid, remove)
        raise
    except LaunchFailed as exc:
        err(f"spark-tui: {exc.message}")
        for line in exc.lines:
            err(f"    | {line}")
        err(f"  remedy: {exc.remedy}")
        return EXIT_FAILED
    finally:
        await s.close()
    cluster = s.cluster
    assert cluster is not None and cluster.plan is not None
    endpoint = next((e for e in reversed(seen) if isinstance(e, ev.Endpoint)), None)
    if cluster.ready:
        print(f"cluster {cluster.cluster_id} ready: {endpoint.api_url if endpoint else '?'}")
    else:
        nodes = ", ".join(node for _rank, node in cluster.ranks)
        print(f"cluster {cluster.cluster_id} started on {nodes}")
        # With the user's nodes and the cluster named: as typed, each command works (another
        # cluster of ours may run beside this one).
        where = targets(args)
        follow = where.command("logs", "--follow", "--cluster", cluster.cluster_id, live=True)
        stop = where.command("stop", "--cluster", cluster.cluster_id, live=True)
        err(f"follow it with `{follow}`; stop it with `{stop}`")
    return EXIT_OK


def _sets(items: list[str]) -> dict[str, str]:
    from spark_tui.service.evaluate import parse_sets

    return parse_sets(items)


def run(args: argparse.Namespace) -> int:
    from spark_tui.commands.interrupts import run_command

    return int(run_command(lambda: _launch(args)))

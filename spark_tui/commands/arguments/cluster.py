"""The arguments of the commands that launch, follow and stop a cluster: `launch`, `status`,
`watch`, `logs`, `stop`, `smoke`."""

from __future__ import annotations

from typing import Any

from spark_tui.commands.arguments.common import cluster, json_flag, on, sets, targets
from spark_tui.core.timeouts import READY_TIMEOUT_S, SMOKE_TIMEOUT_S, WATCH_INTERVAL_S


def launch(sub: Any) -> None:
    p = sub.add_parser("launch", help="start one container per rank")
    p.add_argument("recipe")
    targets(p)
    on(p)
    sets(p)
    p.add_argument("--wait", action="store_true", help="wait until the API is ready")
    p.add_argument("--keep-failed", action="store_true", help="keep the other ranks when one fails")
    p.add_argument("--force", action="store_true", help="launch even when the fit check says no")
    p.add_argument(
        "--replace", action="store_true", help="remove stale spark-tui containers without asking"
    )
    p.add_argument(
        "--ready-timeout",
        type=float,
        default=READY_TIMEOUT_S,
        metavar="SECONDS",
        help="with --wait: give up when the API is not ready after this long (default "
        f"{READY_TIMEOUT_S:.0f})",
    )


def status(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        help="our clusters on the nodes, with the API and its tunnel",
        epilog="exit status: 0 every cluster runs or none is there; 1 a cluster failed (the "
        "rank, why, and the clean-up command are printed); 3 a node could not be reached",
    )
    targets(p)
    json_flag(p)


def watch(sub: Any) -> None:
    p = sub.add_parser(
        "watch",
        help="watch a ready cluster: a tiny request, /metrics, node memory, every rank",
        epilog="exit status: 0 ended with Ctrl+C; 1 the cluster failed (the rank and its lines "
        "are printed, every rank is stopped and its last lines kept in the history; with "
        "--keep-failed they are left, with the command that removes them); 3 a node could "
        "not be reached at the start",
    )
    targets(p)
    cluster(p, "watch")
    p.add_argument(
        "--interval",
        type=float,
        default=WATCH_INTERVAL_S,
        metavar="S",
        help="seconds between samples",
    )
    p.add_argument(
        "--keep-failed",
        action="store_true",
        help="when a rank fails, keep every rank for inspection (stop them yourself)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per event and line")


def logs(sub: Any) -> None:
    p = sub.add_parser("logs", help="print (or follow) the ranks' logs")
    targets(p)
    cluster(p, "the logs of")
    p.add_argument("--rank", type=int, help="only this rank's log")
    p.add_argument("--follow", action="store_true", help="keep reading until Ctrl+C")
    p.add_argument("--tail", type=int, default=200, help="start this many lines back (0: all)")


def stop(sub: Any) -> None:
    p = sub.add_parser("stop", help="stop and remove every rank's container")
    targets(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--cluster",
        metavar="ID",
        help="only this cluster of ours (default: the only one; `status` lists them)",
    )
    which.add_argument("--all", action="store_true", help="every cluster of ours on the nodes")


def smoke(sub: Any) -> None:
    p = sub.add_parser("smoke", help="health, models, chat, tool-call and streaming checks")
    targets(p, base_url=True)
    cluster(p, "check")
    p.add_argument("--model", help="model id (default: the first of /v1/models)")
    p.add_argument(
        "--timeout",
        type=float,
        default=SMOKE_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up on one check after this long (default {SMOKE_TIMEOUT_S:.0f})",
    )
    json_flag(p)

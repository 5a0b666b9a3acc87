"""The watch action: sample a ready cluster (a tiny request, /metrics, node memory, every
rank's container) until a rank fails (a WatchAlert: the rank that went first, its lines,
the head's), then settle the failure as a failed launch does: every rank stopped and its
last lines kept in the history, or (keep failed) the ranks kept for inspection with the
command that removes them."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from spark_tui.core.errors import SparkError
from spark_tui.core.timeouts import WATCH_INTERVAL_S, WATCH_REQUEST_TIMEOUT_S
from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.ops.history import Run
    from spark_tui.service.pump import Emit
    from spark_tui.service.session import Session


async def watch(
    session: Session,
    emit: Emit[ev.WatchEvent],
    cluster_id: str | None = None,
    *,
    interval: float = WATCH_INTERVAL_S,
    request_timeout: float = WATCH_REQUEST_TIMEOUT_S,
    cleanup: str | None = None,
    keep_failed: bool = False,
) -> None:
    """Watch the cluster named (or chosen), else ours, else the only one on the nodes (see module doc);
    the alert names `cleanup` when the ranks are kept. Raises OperationFailed when there is
    nothing to watch."""
    await session.connect(strict=True)
    ours = session.cluster if session.cluster is not None and session.cluster.running else None
    wanted = cluster_id or session.chosen or (ours.cluster_id if ours else None)
    alert: ev.WatchAlert | None = None

    def sampled(event: ev.WatchSample) -> None:
        nonlocal wanted, alert
        if isinstance(event, ev.WatchStarted):
            wanted = event.cluster_id
        alert = event if isinstance(event, ev.WatchAlert) else alert
        emit(event)

    await session.nodes.watch(
        wanted,
        interval=interval,
        request_timeout=request_timeout,
        cleanup=cleanup if keep_failed else None,
        emit=sampled,
    )
    if alert is not None:
        await settle(session, emit, alert, wanted, keep_failed)


async def settle(
    session: Session,
    emit: Emit[ev.WatchEvent],
    alert: ev.WatchAlert,
    cluster_id: str | None,
    keep_failed: bool,
) -> None:
    """After a watch's alert: the other ranks stopped and their lines kept (else kept for
    inspection), as a failed launch leaves them. `cluster_id` None: the only cluster on the
    nodes (the watch picked it for being the only one)."""
    # The history's records load pydantic's models: when a failure is kept, not at import.
    from spark_tui.service.history import keep_stopped_logs

    ours = session.cluster
    if ours is not None and cluster_id in (None, ours.cluster_id) and ours.followed:
        return  # the launch or attach that follows it settles it
    found = [c for c in await session.nodes.status() if cluster_id in (None, c.cluster_id)]
    cluster_id = cluster_id or (found[0].cluster_id if found else None)
    history = session.history
    run = history.launch_of(cluster_id) if cluster_id else None
    if not keep_failed:
        if run is not None:
            with contextlib.suppress(OSError, SparkError):
                why = f"rank {alert.rank} on {alert.node} {alert.reason}"
                run = history.mark_failed(run.id, f"failed after it was ready: {why}")
        session.nodes_changed()
        report = await session.nodes.stop(cluster_id, emit)
        keep_stopped_logs(history, report, reason=f"stopped: rank {alert.rank} failed")
        emit(ev.Stopped(cluster_id, list(report.removed), list(report.left), list(report.killed)))
    if ours is not None and cluster_id == ours.cluster_id:
        ours.failed = True
        ours.unwatched = keep_failed
    if cluster_id is not None:
        emit(settled(cluster_id, run, keep_failed))


def settled(cluster_id: str, run: Run | None, keep_failed: bool) -> ev.Notice:
    """What became of a cluster whose rank failed, and where its logs are (the history's
    launch record of the cluster: `History.launch_of`)."""
    where = " in the history" if run is not None else ""
    if keep_failed:
        return ev.Notice(
            "warning",
            f"the ranks of cluster {cluster_id} are kept for inspection (keep failed)",
            "read their logs, then stop them",
        )
    # A warning: the cockpit shows it beside the failure, not under the next status.
    return ev.Notice(
        "warning",
        f"every rank of cluster {cluster_id} was stopped and removed"
        + (f"; their last log lines are kept{where}" if where else ""),
    )

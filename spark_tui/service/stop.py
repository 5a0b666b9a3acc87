"""The stop action: remove every rank's container (of one cluster, else of all ours when
asked so) and check again that none is left (the command that does it by hand is
`Targets.command("stop")`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.service.pump import Emit
    from spark_tui.service.session import Session


async def stop_all(
    session: Session, emit: Emit[ev.StopEvent], cluster_id: str | None, *, keep_logs: bool = False
) -> ev.Stopped:
    """Remove the containers (see module doc) and forget our cluster if it was among them
    (`keep_logs`: the ranks' last lines into the history first): Stopped."""
    session.nodes_changed()
    report = await session.nodes.stop(cluster_id, emit)
    if keep_logs:
        # (The history's records load pydantic: not when a launch replacing a cluster
        # imports this module.)
        from spark_tui.service.history import keep_stopped_logs

        keep_stopped_logs(session.history, report)
    cluster = session.cluster
    if cluster is not None and cluster_id in (None, cluster.cluster_id):
        cluster.failed = True
        cluster.ready = False
        session.cluster = None
    stopped = ev.Stopped(cluster_id, list(report.removed), list(report.left), list(report.killed))
    emit(stopped)
    return stopped


async def stop(
    session: Session, emit: Emit[ev.StopEvent], cluster_id: str | None, *, every: bool = False
) -> None:
    """The stop action: every node must answer (a stop must not silently leave one out);
    each rank's last lines go into its launch's record. Without `cluster_id` (nor a
    chosen one): every cluster of ours when `every`, else the only one (several is an
    error naming them: stopping one service must not take the other with it)."""
    await session.connect(strict=True)
    cluster_id = cluster_id or session.chosen
    if cluster_id is None and not every:
        from spark_tui.ops.cluster import several_clusters

        found = [c for c in await session.nodes.status() if c.ranks]
        if len(found) > 1:
            raise several_clusters(found, other="or stop every one with --all")
    await stop_all(session, emit, cluster_id, keep_logs=True)

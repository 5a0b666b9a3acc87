"""The attach action: follow a running cluster of ours like a launch (its logs, ready,
failures), found on the nodes by its containers' labels."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui.core.errors import OperationFailed, SparkError, UnreachableError
from spark_tui.service import events as ev
from spark_tui.service.cluster import Cluster

if TYPE_CHECKING:
    from spark_tui.ops.cluster import ClusterStatus
    from spark_tui.service.pump import Emit
    from spark_tui.service.session import Session


async def running(session: Session) -> ClusterStatus | None:
    """The running cluster of ours on the nodes: the chosen one (`session.chosen`), else
    the only one (None: none runs). Several and none chosen is an error naming them."""
    from spark_tui.ops.cluster import several_clusters

    live = [c for c in await session.nodes.status() if c.running]
    chosen = session.chosen
    if chosen is not None:
        named = [c for c in live if c.cluster_id == chosen]
        if not named:
            raise OperationFailed(
                f"no running spark-tui cluster {chosen!r} on these nodes",
                "list them with `spark-tui status`",
            )
        return named[0]
    if len(live) > 1:
        raise several_clusters(live)
    return live[0] if live else None


def adopt(session: Session, found: ClusterStatus, head_argv: list[str]) -> Cluster:
    """The session's cluster from one found on the nodes (its launch record, if any, gives
    the overrides it was launched with)."""
    cluster = Cluster(
        found.cluster_id,
        found.recipe or "?",
        ranks=[(r.rank, r.node) for r in found.ranks],
        head_argv=head_argv,
    )
    cluster.launch_run = session.history.launch_of(found.cluster_id, found.recipe)
    if cluster.launch_run is not None:
        cluster.overrides = dict(cluster.launch_run.overrides)
    session.cluster = cluster
    if session.chosen is not None:
        session.chosen = cluster.cluster_id  # the actions after it act on this one
    return cluster


async def attach(
    session: Session, emit: Emit[ev.AttachEvent], found: ClusterStatus, *, keep_failed: bool = False
) -> None:
    """The attach action (see module doc); a failure stops the other ranks unless
    `keep_failed`."""
    head = found.ranks[0]
    cluster = adopt(session, found, list(head.command))
    cluster.endpoint = session.endpoint(found.cluster_id, head.node, cluster.api_port)
    emit(cluster.endpoint)
    cluster.followed = True

    def followed(event: ev.ClusterEvent) -> None:
        if isinstance(event, ev.ClusterReady):
            cluster.base_url = event.base_url
            cluster.ready = True
        emit(event)

    session.nodes_changed()  # a failure removes the other ranks
    try:
        await session.nodes.attach(found.cluster_id, keep_failed=keep_failed, emit=followed)
    except SparkError as exc:
        cluster.failed = True
        cluster.unwatched = isinstance(exc, UnreachableError) or keep_failed
        raise
    finally:
        cluster.followed = False

"""The logs action: the ranks' container logs of our cluster on the nodes, merged in time
order, or followed until every container ends (across dropped connections of any length,
without losing or repeating a line: NodeUnreachable after each failed attempt, NodeReachable
once the node answers again, RankLogEnded per container)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from spark_tui.core.errors import InputError, NoClusterError, SparkError
from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.ops.cluster import ClusterStatus, RankStatus
    from spark_tui.service.pump import Emit
    from spark_tui.service.session import Session


# The API paths the cockpit and the CLI call on their own (health and model checks, the
# benchmark's metrics sampling): their access-log lines are ours, not the user's traffic.
OWN_REQUEST_PATHS = ("/metrics", "/health", "/v1/models")


def is_own_request(line: ev.LogLine) -> bool:
    """An access-log line of one of our own polling requests (see OWN_REQUEST_PATHS), or of
    the watch's tiny request (marked by its query, which the server ignores)."""
    from spark_tui.ops.watch import PROBE_MARK

    if line.scope != "access" or not line.detail:
        return False
    parts = line.detail.split()
    if len(parts) != 3:
        return False
    if parts[0] == "POST" and parts[1].endswith("?" + PROBE_MARK):
        return True
    return parts[0] == "GET" and parts[1] in OWN_REQUEST_PATHS


async def log_ranks(session: Session, rank: int | None) -> tuple[ClusterStatus, list[RankStatus]]:
    """The cluster whose logs to read (the chosen one, else the running one, else the only
    one: a stopped cluster's logs are still there) and its ranks (only `rank` when given)."""
    from spark_tui.ops.attach import pick_cluster

    clusters = await session.nodes.status()
    if not clusters:
        raise NoClusterError(session.where)
    try:
        cluster = pick_cluster(clusters, session.chosen)
    except SparkError:
        if len(clusters) != 1 or session.chosen is not None:
            raise
        cluster = clusters[0]
    ranks = [r for r in cluster.ranks if rank is None or r.rank == rank]
    if not ranks:
        raise InputError(
            f"cluster {cluster.cluster_id} has no rank {rank}",
            f"ranks are {', '.join(str(r.rank) for r in cluster.ranks)}",
        )
    return cluster, ranks


async def logs(
    session: Session, emit: Emit[ev.LogsEvent], *, rank: int | None, tail: int | None, follow: bool
) -> None:
    """The logs action (see module doc); `tail` lines back per rank (None: all)."""
    await session.connect(strict=True)
    _cluster, ranks = await log_ranks(session, rank)
    if not follow:
        records: list[ev.RankLogRecord] = []

        def kept(event: ev.LogEvent) -> None:
            if isinstance(event, ev.RankLogRecord):
                records.append(event)

        for r in ranks:
            await session.nodes.rank_log(r, tail=tail, follow=False, emit=kept)
        for rec in sorted(records, key=lambda x: (x.ts_ns, x.rank)):
            emit(rec)
        return

    await asyncio.gather(
        *(session.nodes.rank_log(r, tail=tail, follow=True, emit=emit) for r in ranks)
    )

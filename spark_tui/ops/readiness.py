"""Whether a running cluster of ours is still loading or is ready: the truth is the head's
API answering /health through an SSH forward (what a launch waits for); while it loads, each
rank's progress is read from the tail of its log (core.logclass: weights, CUDA graphs)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from spark_tui.core import logclass
from spark_tui.core.errors import SparkError
from spark_tui.ops.attach import api_port_of
from spark_tui.ops.cluster import ClusterStatus, RankStatus
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.ssh import ConnectionPool

# Log lines read per rank for its progress (a loading engine's bars are recent).
_TAIL = 300


@dataclass(frozen=True)
class RankProgress:
    """One loading rank: its latest progress bar (0..1) and what it counts, else the latest
    startup phase it logged (None when its log says neither yet)."""

    rank: int
    node: str
    progress: float | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Readiness:
    """A running cluster's `state`, "ready" (its API answers /health) or "loading", with
    each rank's progress while it loads."""

    state: str
    ranks: tuple[RankProgress, ...] = ()

    @property
    def progress(self) -> float | None:
        """The cluster's progress: its slowest rank's (None when no rank shows a bar)."""
        known = [r.progress for r in self.ranks if r.progress is not None]
        return min(known) if known else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "progress": self.progress}


async def _answers_health(
    pool: ConnectionPool, head: RankStatus, timeout: float, api_host: str
) -> bool:
    with contextlib.suppress(SparkError, OSError, httpx.HTTPError):
        port = await pool[head.node].forward_local_port(
            api_host, api_port_of(list(head.command), head.labels)
        )
        async with httpx.AsyncClient(timeout=timeout) as client:
            answer = await client.get(f"http://127.0.0.1:{port}/health")
        return answer.status_code == 200
    return False


async def _rank_progress(docker: RemoteDocker, rs: RankStatus) -> RankProgress:
    try:
        records = await docker.logs(rs.container, tail=_TAIL)
    except SparkError:
        return RankProgress(rs.rank, rs.node)
    progress: float | None = None
    detail: str | None = None
    for record in records:
        found = logclass.classify(record.text)
        if found.kind == "progress":
            progress, detail = found.progress, found.detail
        elif found.kind == "phase" and found.detail:
            # A phase after the last bar says where it is now (e.g. the KV cache's profile).
            detail = found.detail
    return RankProgress(rs.rank, rs.node, progress, detail)


async def readiness(
    pool: ConnectionPool,
    dockers: dict[str, RemoteDocker],
    cluster: ClusterStatus,
    *,
    timeout: float = 5.0,
    api_host: str = "127.0.0.1",
) -> Readiness:
    """Ready or loading (see module doc), for a cluster whose every rank runs."""
    head = min(cluster.ranks, key=lambda r: r.rank)
    if await _answers_health(pool, head, timeout, api_host):
        return Readiness("ready")
    present = [r for r in cluster.ranks if r.node in dockers]
    ranks = await asyncio.gather(*(_rank_progress(dockers[r.node], r) for r in present))
    return Readiness("loading", tuple(ranks))

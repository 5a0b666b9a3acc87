"""Why a cluster of ours is down: which rank failed first, its reason and explaining lines,
the head's explaining lines after a worker's death, and the command that cleans it up.

Used by `status` (a cluster found dead after `launch --wait` returned) and by the watch
(a rank that died while watched). Reads only what Docker keeps: the container's State and
the tail of its log, classified by core.logclass.
"""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from spark_tui.core import logclass
from spark_tui.core.errors import SparkError
from spark_tui.ops.cluster import ClusterStatus, RankStatus
from spark_tui.ops.launch import exit_reason
from spark_tui.ops.readiness import Readiness, readiness
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.ssh import ConnectionPool

# Exit codes of a container that was stopped on purpose (clean exit, SIGTERM).
_STOPPED_CODES = (0, 143)
_TAIL = 300


@dataclass(frozen=True)
class RankFailure:
    """One rank that is down: why (from Docker's State) and the lines of its log that explain it."""

    rank: int
    node: str
    container: str
    reason: str
    lines: tuple[str, ...] = ()
    finished_at: str = ""


@dataclass
class ClusterDiagnosis:
    """A cluster's verdict: `state` is "running", "failed" or "stopped".

    `failed` lists the ranks that are down, the one that went first leading; `head_lines`
    are the head's explaining lines when the first failure was another rank's (a worker's
    death is usually explained by what the head says about it). `cleanup` is the exact
    command that removes the cluster's containers. A running cluster's `readiness` says
    whether it is still loading (and how far) or ready, when the pool was given.
    """

    cluster_id: str
    state: str
    failed: list[RankFailure] = field(default_factory=list)
    head_lines: tuple[str, ...] = ()
    cleanup: str | None = None
    readiness: Readiness | None = None

    @property
    def first(self) -> RankFailure | None:
        return self.failed[0] if self.failed else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["failed_rank"] = self.first.rank if self.first else None
        data["readiness"] = self.readiness.to_dict() if self.readiness else None
        return data


def _exit_code(info: dict[str, Any] | None) -> int | None:
    state = (info or {}).get("State") or {}
    if state.get("Running"):
        return None
    try:
        return int(state.get("ExitCode") or 0)
    except (TypeError, ValueError):
        return None


def _failed_on_its_own(info: dict[str, Any] | None) -> bool:
    """A container that is down for a reason (crash, kill, OOM), not stopped on purpose."""
    state = (info or {}).get("State") or {}
    if info is None or state.get("Running"):
        return False
    if state.get("OOMKilled") or state.get("Error"):
        return True
    return _exit_code(info) not in _STOPPED_CODES


async def rank_evidence(
    docker: RemoteDocker, rs: RankStatus
) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """(inspect, explaining lines of the log tail) of one rank; lines are () when unreadable."""
    info = await docker.inspect(rs.container)
    try:
        records = await docker.logs(rs.container, tail=_TAIL)
    except SparkError:
        records = []
    text = [r.text for r in records]
    lines = tuple(logclass.explain_failure(text))
    if not lines and info is not None and not (info.get("State") or {}).get("Running"):
        lines = tuple([t for t in text if t.strip()][-3:])
    return info, lines


def verdict(cluster: ClusterStatus, infos: dict[int, dict[str, Any] | None]) -> str:
    """running, failed (a rank is down for a reason, or only some ranks run) or stopped."""
    states = {r.state for r in cluster.ranks}
    if states == {"running"}:
        return "running"
    if "running" in states:
        return "failed"  # a rank down while the others run cannot serve
    if any(_failed_on_its_own(infos.get(r.rank)) for r in cluster.ranks):
        return "failed"
    return "stopped"


def cluster_cleanup(cleanup: str | None, cluster_id: str) -> str | None:
    """`cleanup` (the user's `spark-tui stop ...`) naming this cluster: with clusters side
    by side a bare `stop` asks which, so `status` and `watch` both name it."""
    return f"{cleanup} --cluster {shlex.quote(cluster_id)}" if cleanup else None


async def diagnose(
    cluster: ClusterStatus,
    dockers: dict[str, RemoteDocker],
    *,
    cleanup: str | None = None,
    head_lines: bool = True,
    pool: ConnectionPool | None = None,
) -> ClusterDiagnosis:
    """The diagnosis of one cluster from its containers' State and logs on their nodes;
    with the `pool`, a running one's readiness too (its API through a forward)."""
    present = [r for r in cluster.ranks if r.node in dockers]
    evidence = await asyncio.gather(
        *(rank_evidence(dockers[r.node], r) for r in present), return_exceptions=True
    )
    infos: dict[int, dict[str, Any] | None] = {}
    lines: dict[int, tuple[str, ...]] = {}
    for rs, ev in zip(present, evidence, strict=True):
        if isinstance(ev, tuple):
            infos[rs.rank], lines[rs.rank] = ev
        elif isinstance(ev, SparkError):
            infos[rs.rank], lines[rs.rank] = None, ()
        elif isinstance(ev, BaseException):
            raise ev
    state = verdict(cluster, infos)
    diag = ClusterDiagnosis(cluster.cluster_id, state, cleanup=cleanup)
    if state == "running" and pool is not None:
        diag.readiness = await readiness(pool, dockers, cluster)
    if state != "failed":
        return diag
    down: list[RankFailure] = []
    for rs in cluster.ranks:
        info = infos.get(rs.rank)
        if rs.running or info is None:
            continue
        st = info.get("State") or {}
        down.append(
            RankFailure(
                rank=rs.rank,
                node=rs.node,
                container=rs.container,
                reason=exit_reason(st),
                lines=lines.get(rs.rank, ()),
                finished_at=str(st.get("FinishedAt") or ""),
            )
        )
    # Docker's FinishedAt is RFC 3339 in UTC, so text order is time order: the first to go
    # is the cause, the others its consequences.
    down.sort(key=lambda f: (f.finished_at or "~", f.rank))
    diag.failed = down
    head = cluster.ranks[0] if cluster.ranks else None
    if head_lines and head is not None and down and down[0].rank != head.rank:
        diag.head_lines = lines.get(head.rank, ())
    return diag

"""Our clusters on the nodes, found by container labels: status, and stop (with confirmation).

Every container spark-tui starts carries `spark-tui.cluster`, `spark-tui.rank`,
`spark-tui.role`, `spark-tui.recipe`, `spark-tui.settings-hash`, `spark-tui.node` and
`spark-tui.model` (see core.plan), so a fresh process finds a running cluster again.
A launch's image flag check (`vllm serve --help=all`) may run beside its ranks in a
container of the cluster's with the role `flag-table`: no rank, so `status` leaves it out,
but `stop` removes it with the ranks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from spark_tui.core.errors import InputError, OperationFailed, SparkError
from spark_tui.core.images import ResolvedImage, running_image
from spark_tui.core.plan import LABEL_PREFIX
from spark_tui.ops.events import Emit, Notice, RankState, RankStateChanged, StopUpdate
from spark_tui.ops.image_flags import FLAG_TABLE_ROLE
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.ssh import ConnectionPool, combine_errors

CLUSTER_LABEL = LABEL_PREFIX + "cluster"
RANK_LABEL = LABEL_PREFIX + "rank"
ROLE_LABEL = LABEL_PREFIX + "role"
RECIPE_LABEL = LABEL_PREFIX + "recipe"
HASH_LABEL = LABEL_PREFIX + "settings-hash"
NODE_LABEL = LABEL_PREFIX + "node"
MODEL_LABEL = LABEL_PREFIX + "model"


@dataclass
class RankStatus:
    """One rank's container as Docker reports it on its node."""

    rank: int
    node: str
    container: str
    state: str  # Docker's: created, running, exited, ...
    status: str  # Docker's human text: "Up 3 minutes", "Exited (1) 2 seconds ago"
    role: str | None = None
    image: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.state == "running"


@dataclass
class ClusterStatus:
    """One cluster of ours: its id, recipe and every rank found."""

    cluster_id: str
    recipe: str | None
    settings_hash: str | None
    model: str | None
    ranks: list[RankStatus]

    @property
    def nodes(self) -> list[str]:
        return [r.node for r in self.ranks]

    @property
    def running(self) -> bool:
        return bool(self.ranks) and all(r.running for r in self.ranks)

    @property
    def state(self) -> str:
        states = {r.state for r in self.ranks}
        if states == {"running"}:
            return "running"
        if "running" in states:
            return "degraded"
        return "stopped"

    @property
    def image_resolved(self) -> ResolvedImage | None:
        """The sentinel the head's image was resolved from, with its digest (its labels)."""
        head = min(self.ranks, key=lambda r: r.rank, default=None)
        return running_image(head.image, head.labels) if head is not None else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state
        data["nodes"] = self.nodes
        resolved = self.image_resolved
        data["image_resolved"] = resolved.to_dict() if resolved is not None else None
        return data


def several_clusters(clusters: Sequence[ClusterStatus], *, other: str | None = None) -> InputError:
    """The refusal when more than one of our clusters could be meant and none was named:
    which ones (id, recipe, nodes), and `--cluster ID` for each (`other`: one more way
    out, e.g. a stop's `--all`). A command never picks one of them on its own."""
    listed = "; ".join(
        f"{c.cluster_id} ({c.recipe or '?'} on {', '.join(dict.fromkeys(c.nodes))})"
        for c in clusters
    )
    choices = " or ".join(f"--cluster {c.cluster_id}" for c in clusters)
    remedy = f"name the one you mean: {choices} (`spark-tui status` lists them)"
    return InputError(
        f"{len(clusters)} spark-tui clusters are on these nodes: {listed}",
        f"{remedy}; {other}" if other else remedy,
    )


async def open_dockers(pool: ConnectionPool) -> dict[str, RemoteDocker]:
    """Docker on every reachable node of the pool, opened at once (node name -> client)."""
    conns = pool.reachable
    opened = await asyncio.gather(*(RemoteDocker.open(c) for c in conns), return_exceptions=True)
    dockers: dict[str, RemoteDocker] = {}
    errors: list[SparkError] = []
    for conn, res in zip(conns, opened, strict=True):
        if isinstance(res, RemoteDocker):
            dockers[conn.name] = res
        elif isinstance(res, SparkError):
            errors.append(res)
        elif isinstance(res, BaseException):
            raise res
    if errors:
        await close_dockers(dockers)
        raise combine_errors(errors, len(conns))
    return dockers


async def close_dockers(dockers: dict[str, RemoteDocker]) -> None:
    for d in dockers.values():
        await d.close()


def _rank_status(node: str, raw: dict[str, Any]) -> RankStatus:
    labels = dict(raw.get("Labels") or {})
    names = raw.get("Names") or ["?"]
    try:
        rank = int(labels.get(RANK_LABEL, "-1"))
    except ValueError:
        rank = -1
    command = raw.get("Command") or ""
    return RankStatus(
        rank=rank,
        node=node,
        container=str(names[0]).lstrip("/"),
        state=str(raw.get("State") or "unknown"),
        status=str(raw.get("Status") or ""),
        role=labels.get(ROLE_LABEL),
        image=raw.get("Image"),
        labels=labels,
        command=command.split() if isinstance(command, str) else list(command),
    )


async def status(
    pool: ConnectionPool,
    cluster_id: str | None = None,
    *,
    dockers: dict[str, RemoteDocker] | None = None,
    helpers: bool = False,
) -> list[ClusterStatus]:
    """Our clusters on the pool's nodes, from container labels (running or not);
    `helpers`: with the flag-table containers (rank -1), which are no rank."""
    own = dockers is None
    dockers = dockers if dockers is not None else await open_dockers(pool)
    try:
        label = f"{CLUSTER_LABEL}={cluster_id}" if cluster_id else CLUSTER_LABEL
        names = list(dockers)
        found = await asyncio.gather(*(dockers[n].containers_raw([label]) for n in names))
    finally:
        if own:
            await close_dockers(dockers)
    clusters: dict[str, ClusterStatus] = {}
    for node, raws in zip(names, found, strict=True):
        for raw in raws:
            rs = _rank_status(node, raw)
            if rs.role == FLAG_TABLE_ROLE and not helpers:
                continue
            cid = rs.labels.get(CLUSTER_LABEL, "?")
            cs = clusters.get(cid)
            if cs is None:
                cs = clusters[cid] = ClusterStatus(
                    cluster_id=cid,
                    recipe=rs.labels.get(RECIPE_LABEL),
                    settings_hash=rs.labels.get(HASH_LABEL),
                    model=rs.labels.get(MODEL_LABEL),
                    ranks=[],
                )
            cs.ranks.append(rs)
    for cs in clusters.values():
        cs.ranks.sort(key=lambda r: r.rank)
    return sorted(clusters.values(), key=lambda c: c.cluster_id)


# Lines of each rank's log kept when a stop removes its container (the history keeps them).
STOP_LOG_TAIL = 200


@dataclass
class RankTail:
    """The last lines of a rank's log, read just before its container was removed."""

    cluster_id: str
    rank: int
    node: str
    container: str
    lines: list[str]
    # How the container had ended before the stop (None: it was still running).
    exit_code: int | None = None


@dataclass
class StopReport:
    """What `stop` removed, and what (if anything) is still there after it checked again."""

    removed: list[tuple[str, str]] = field(default_factory=list)  # (node, container)
    left: list[tuple[str, str]] = field(default_factory=list)
    # Did not stop within the grace period after SIGTERM (real vLLM waiting for a peer
    # ignores it), so they were killed with SIGKILL.
    killed: list[tuple[str, str]] = field(default_factory=list)
    tails: list[RankTail] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.left


async def remove_ranks(
    dockers: dict[str, RemoteDocker],
    targets: Sequence[tuple[str, str, int]],
    *,
    emit: Emit[StopUpdate] | None = None,
    stop_timeout: int = 10,
    killed: list[tuple[str, str]] | None = None,
    tails: dict[tuple[str, str], tuple[list[str], int | None]] | None = None,
) -> list[tuple[str, str]]:
    """Stop and remove (node, container, rank) targets at once; returns those removed.
    Each gets SIGTERM and `stop_timeout` s to end, then SIGKILL; one that had to be killed
    is named in a warning Notice (and appended to `killed`). With `tails`, each container's
    last log lines and earlier exit code are put there (by (node, name)) before it is removed."""

    async def one(node: str, name: str, rank: int) -> tuple[str, str] | None:
        docker = dockers[node]
        before = await docker.inspect(name)
        if before is None:
            return None
        started = time.monotonic()
        state = await docker.stop(name, timeout=stop_timeout)
        if state is not None and state.get("Running"):
            await docker.kill(name)  # docker stop gave up on it: kill it ourselves
            state = {"ExitCode": 137}
        was_running = bool((before.get("State") or {}).get("Running"))
        if (
            was_running
            and state is not None
            and state.get("ExitCode") == 137
            and time.monotonic() - started >= stop_timeout * 0.9
        ):
            who = f"rank {rank} ({name})" if rank >= 0 else name
            if killed is not None:
                killed.append((node, name))
            if emit is not None:
                emit(
                    Notice(
                        "warning",
                        f"{who} on {node} did not stop within {stop_timeout} s of SIGTERM: "
                        "killed with SIGKILL",
                    )
                )
        if tails is not None:
            ended = before.get("State") or {}
            code = None if ended.get("Running") else ended.get("ExitCode")
            try:
                records = await docker.logs(name, tail=STOP_LOG_TAIL)
            except SparkError:
                records = []  # the log is lost with the container; the stop goes on
            tails[(node, name)] = ([r.text for r in records], code)
        removed = await docker.remove(name, stop_timeout=stop_timeout)
        if emit is not None and rank >= 0:
            emit(RankStateChanged(rank=rank, node=node, state=RankState.STOPPED))
        return (node, name) if removed else None

    results = await asyncio.gather(
        *(one(n, c, r) for n, c, r in targets if n in dockers), return_exceptions=True
    )
    done: list[tuple[str, str]] = []
    for res in results:
        if isinstance(res, tuple):
            done.append(res)
        elif isinstance(res, SparkError) and emit is not None:
            emit(Notice("error", res.message, res.remedy))
        elif isinstance(res, BaseException) and not isinstance(res, SparkError):
            raise res
    return done


async def stop(
    pool: ConnectionPool,
    cluster_id: str | None = None,
    *,
    emit: Emit[StopUpdate] | None = None,
    dockers: dict[str, RemoteDocker] | None = None,
    stop_timeout: int = 10,
) -> StopReport:
    """Remove every rank's container of our cluster(s) on every node, then list again to
    confirm none is left. Raises OperationFailed naming any container still there."""
    own = dockers is None
    dockers = dockers if dockers is not None else await open_dockers(pool)
    try:
        before = await status(pool, cluster_id, dockers=dockers, helpers=True)
        targets = [(r.node, r.container, r.rank) for c in before for r in c.ranks]
        report = StopReport()
        tails: dict[tuple[str, str], tuple[list[str], int | None]] = {}
        report.removed = await remove_ranks(
            dockers,
            targets,
            emit=emit,
            stop_timeout=stop_timeout,
            killed=report.killed,
            tails=tails,
        )
        report.tails = [
            RankTail(c.cluster_id, r.rank, r.node, r.container, *tails[(r.node, r.container)])
            for c in before
            for r in c.ranks
            if (r.node, r.container) in tails and r.rank >= 0
        ]
        after = await status(pool, cluster_id, dockers=dockers, helpers=True)
        report.left = [(r.node, r.container) for c in after for r in c.ranks]
    finally:
        if own:
            await close_dockers(dockers)
    if report.left:
        names = ", ".join(f"{c} on {n}" for n, c in report.left)
        raise OperationFailed(
            f"still there after stop: {names}",
            "remove them by hand on each node: `docker rm -f NAME`",
        )
    return report

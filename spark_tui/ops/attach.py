"""Attach to a running cluster of ours after a restart: find it by labels, resume every log
stream, watch for readiness and failures as a launch does; and the API forward other
commands (smoke, bench) use to reach a running cluster's head.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_tui.core.errors import NoClusterError, OperationFailed
from spark_tui.core.plan import API_PORT_LABEL, flag_value
from spark_tui.core.ports import DEFAULT_API_PORT
from spark_tui.core.timeouts import READY_TIMEOUT_S
from spark_tui.ops.cluster import (
    ClusterStatus,
    RankStatus,
    close_dockers,
    open_dockers,
    several_clusters,
    status,
)
from spark_tui.ops.events import ClusterEvent, Emit, Notice, RankState, RankStateChanged
from spark_tui.ops.launch import ClusterWatch, WatchedRank
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.ssh import ConnectionPool


def pick_cluster(clusters: list[ClusterStatus], cluster_id: str | None = None) -> ClusterStatus:
    """The one cluster to attach to: the one named, or the only running one."""
    if cluster_id is not None:
        for c in clusters:
            if c.cluster_id == cluster_id:
                return c
        raise OperationFailed(
            f"no spark-tui cluster {cluster_id!r} on these nodes",
            "list them with `spark-tui status`",
        )
    running = [c for c in clusters if any(r.running for r in c.ranks)]
    if not running:
        raise NoClusterError(ended=[c.cluster_id for c in clusters])
    if len(running) > 1:
        raise several_clusters(running)
    return running[0]


async def rank_argv(docker: RemoteDocker, container: str) -> list[str]:
    """The argv a container runs (entrypoint + command), from Docker's inspect."""
    info = await docker.inspect(container) or {}
    config = info.get("Config") or {}
    entry = config.get("Entrypoint") or []
    cmd = config.get("Cmd") or []
    return [*(entry if isinstance(entry, list) else [entry]), *cmd]


def api_port_of(argv: list[str], labels: Mapping[str, str] | None = None) -> int:
    """The API port a `vllm serve` argv listens on; a Ray head (whose argv is `ray start`,
    whose `--port` is Ray's) says it in its api-port label."""
    value = (labels or {}).get(API_PORT_LABEL) or flag_value(argv, "--port")
    return int(value) if value and value.isdigit() else DEFAULT_API_PORT


def _watched(pool: ConnectionPool, dockers: dict[str, RemoteDocker], rs: RankStatus) -> WatchedRank:
    return WatchedRank(
        rank=rs.rank,
        node=rs.node,
        name=rs.container,
        serves_api=rs.role in ("head", "ray-head") or rs.rank == 0,
        conn=pool[rs.node],
        docker=dockers[rs.node],
    )


async def attach(
    pool: ConnectionPool,
    cluster_id: str | None = None,
    *,
    emit: Emit[ClusterEvent],
    tail: int | str = 200,
    wait_ready: bool = True,
    follow: bool = True,
    keep_failed: bool = False,
    ready_timeout: float = READY_TIMEOUT_S,
    api_host: str = "127.0.0.1",
    settle: float = 1.0,
) -> None:
    """Find our running cluster on the pool's (opened) nodes and watch it like a launch:
    RankStateChanged for every rank found, then every rank's log from its last `tail`
    lines on, ClusterReady once /health answers through the forward. A rank that is down
    or fails is reported (and the others stopped, unless `keep_failed`): LaunchFailed. Each
    event goes to `emit`."""
    dockers = await open_dockers(pool)
    try:
        cluster = pick_cluster(await status(pool, cluster_id, dockers=dockers), cluster_id)
        head = cluster.ranks[0]
        argv = await rank_argv(dockers[head.node], head.container)
        emit(
            Notice(
                "info",
                f"attached to cluster {cluster.cluster_id} ({cluster.recipe}) on "
                + ", ".join(cluster.nodes),
            )
        )
        ranks = [_watched(pool, dockers, r) for r in cluster.ranks]
        for r, rs in zip(ranks, cluster.ranks, strict=True):
            r.state = RankState.STARTING if rs.running else RankState.STOPPED
            emit(RankStateChanged(rank=r.rank, node=r.node, state=r.state))
        watch = ClusterWatch(
            cluster.cluster_id,
            ranks,
            emit,
            api_host=api_host,
            api_port=api_port_of(argv, head.labels),
            keep_failed=keep_failed,
            ready_timeout=ready_timeout,
            settle=settle,
            tail=tail,
        )
        await watch.run(wait_ready=wait_ready, follow=follow)
    finally:
        await close_dockers(dockers)


@dataclass
class FoundCluster:
    """A running cluster reached through an SSH forward to its head's API port."""

    cluster_id: str
    recipe: str | None
    base_url: str  # http://127.0.0.1:PORT (the local end of the forward)
    ranks: list[dict[str, Any]] = field(default_factory=list)  # rank, node, labels, argv
    # The API as the head sees it (what the forward reaches), for clients that open their
    # own channels on the head's connection.
    head_node: str | None = None
    api_host: str = "127.0.0.1"
    api_port: int | None = None


async def find_api(
    pool: ConnectionPool, cluster_id: str | None = None, *, api_host: str = "127.0.0.1"
) -> FoundCluster:
    """Forward a local port to the running cluster's head API (valid while the pool is open)."""
    dockers = await open_dockers(pool)
    try:
        cluster = pick_cluster(await status(pool, cluster_id, dockers=dockers), cluster_id)
        ranks: list[dict[str, Any]] = []
        head_argv: list[str] = []
        for rs in cluster.ranks:
            argv = await rank_argv(dockers[rs.node], rs.container)
            ranks.append(
                {
                    "rank": rs.rank,
                    "node": rs.node,
                    "role": rs.role,
                    "container_name": rs.container,
                    "state": rs.state,
                    "labels": rs.labels,
                    "argv": argv,
                }
            )
            head_argv = head_argv or argv
    finally:
        await close_dockers(dockers)
    head = cluster.ranks[0]
    api_port = api_port_of(head_argv, head.labels)
    port = await pool[head.node].forward_local_port(api_host, api_port)
    return FoundCluster(
        cluster_id=cluster.cluster_id,
        recipe=cluster.recipe,
        base_url=f"http://127.0.0.1:{port}",
        ranks=ranks,
        head_node=head.node,
        api_host=api_host,
        api_port=api_port,
    )

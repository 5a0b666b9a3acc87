"""Sample every node's memory and the traffic of the interfaces its ranks use, while a
benchmark or the watch runs.

The interfaces are the ones each rank's container names in NCCL_SOCKET_IFNAME and
GLOO_SOCKET_IFNAME (Docker's inspect): per node, since a worker's ConnectX names may differ
from the head's. A sample is one command per node (`remote.link_sample`) over the node's
open SSH connection, a new session on it, never a new connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from spark_tui.core.errors import SparkError
from spark_tui.core.link import NodeReading, env_of, rank_interfaces, rates
from spark_tui.ops.cluster import ClusterStatus, close_dockers, open_dockers, status
from spark_tui.ops.events import Emit, LinkSample, NodeNotAnswering
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.link_sample import parse_sample, sample_command
from spark_tui.remote.ssh import ConnectionPool

# How often a benchmark samples (the watch samples at its own interval).
LINK_INTERVAL_S = 1.0


async def rank_interfaces_by_node(
    dockers: dict[str, RemoteDocker], cluster: ClusterStatus, timeout: float
) -> dict[str, list[str]]:
    """Every node of the cluster, with the interfaces its ranks' environments name (none
    when a container cannot be read: its node's memory is still sampled)."""

    async def one(node: str, container: str) -> list[str]:
        docker = dockers.get(node)
        if docker is None:
            return []
        try:
            info = await asyncio.wait_for(docker.inspect(container), timeout) or {}
        except (SparkError, TimeoutError):
            return []
        env = env_of((info.get("Config") or {}).get("Env") or [])
        return rank_interfaces(env)

    found = await asyncio.gather(*(one(r.node, r.container) for r in cluster.ranks))
    out: dict[str, list[str]] = {}
    for rs, names in zip(cluster.ranks, found, strict=True):
        have = out.setdefault(rs.node, [])
        have.extend(n for n in names if n not in have)
    return out


class LinkSampler:
    """Samples nodes (name -> interfaces to watch); keeps each node's last reading, so each
    sample's rates are since the previous one."""

    def __init__(
        self, pool: ConnectionPool, interfaces: dict[str, list[str]], *, timeout: float
    ) -> None:
        self.pool = pool
        self.interfaces = interfaces
        self.timeout = timeout
        self.commands = {node: sample_command(names) for node, names in interfaces.items()}
        self.last: dict[str, NodeReading] = {}
        self.down_since: dict[str, float] = {}

    async def sample_node(self, node: str) -> LinkSample | NodeNotAnswering:
        """One sample of `node` (NodeNotAnswering when it does not answer in time)."""
        try:
            res = await asyncio.wait_for(
                self.pool[node].run(self.commands[node], timeout=self.timeout), self.timeout + 1
            )
        except (SparkError, TimeoutError) as exc:
            since = self.down_since.setdefault(node, time.monotonic())
            message = exc.message if isinstance(exc, SparkError) else "no answer in time"
            return NodeNotAnswering(node, round(time.monotonic() - since, 1), message)
        self.down_since.pop(node, None)
        reading = parse_sample(res.stdout, self.interfaces[node])
        before = self.last.get(node)
        self.last[node] = reading
        now = rates(before if before is not None else reading, reading)
        return LinkSample(node, reading.mem_total, reading.mem_available, now, reading.missing)

    async def sample(self) -> list[LinkSample | NodeNotAnswering]:
        """Every node at once."""
        return list(await asyncio.gather(*(self.sample_node(n) for n in self.commands)))


async def open_sampler(
    pool: ConnectionPool,
    cluster: ClusterStatus,
    dockers: dict[str, RemoteDocker],
    *,
    timeout: float,
) -> LinkSampler:
    """A sampler of the cluster's nodes and their ranks' interfaces."""
    return LinkSampler(
        pool, await rank_interfaces_by_node(dockers, cluster, timeout), timeout=timeout
    )


async def sample_link(
    pool: ConnectionPool,
    cluster_id: str | None,
    emit: Emit[LinkSample | NodeNotAnswering],
    *,
    interval: float = LINK_INTERVAL_S,
    timeout: float = 5.0,
    nodes: Sequence[str] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Sample the cluster's nodes every `interval` seconds, handing each sample to `emit`,
    until cancelled, or until `stop` is set: then once more (what moved since the last
    sample counts too) and return. Without a cluster of ours on the nodes (`cluster_id`
    None: the only one), `nodes`' memory alone (all the pool's when None)."""
    dockers = await open_dockers(pool)
    try:
        found = await status(pool, cluster_id, dockers=dockers)
        if cluster_id is not None:
            found = [c for c in found if c.cluster_id == cluster_id]
        if len(found) == 1:
            sampler = await open_sampler(pool, found[0], dockers, timeout=timeout)
        else:
            names = list(nodes) if nodes is not None else [c.name for c in pool.reachable]
            sampler = LinkSampler(pool, {n: [] for n in names}, timeout=timeout)
    finally:
        await close_dockers(dockers)
    stop = stop if stop is not None else asyncio.Event()
    while True:
        started = time.monotonic()
        with contextlib.suppress(SparkError):
            for event in await sampler.sample():
                emit(event)
        if stop.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, interval - (time.monotonic() - started)))

"""The product's `Nodes`: real Sparks over SSH (one asyncssh connection per node, reused),
the operations of `spark_tui.ops` run on that pool."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from spark_tui.core.errors import SparkError

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.fit import Finding
    from spark_tui.core.inventory import InventoryNode
    from spark_tui.core.model_presence import ModelNeed
    from spark_tui.core.plan import LaunchPlan
    from spark_tui.ops.attach import FoundCluster
    from spark_tui.ops.bench import BenchConfig, BenchUpdate
    from spark_tui.ops.cluster import ClusterStatus, RankStatus, StopReport
    from spark_tui.ops.diagnose import ClusterDiagnosis
    from spark_tui.ops.events import Emit
    from spark_tui.ops.smoke import SmokeResult
    from spark_tui.remote.docker_remote import RemoteDocker
    from spark_tui.remote.probe import ProbeDockers
    from spark_tui.remote.ssh import ConnectionPool
    from spark_tui.service import events as ev
    from spark_tui.service.api import ApiTarget
    from spark_tui.service.nodes import BenchRunning, ConfirmKey, ReplaceStale


class SshNodes:
    """The inventory's nodes over SSH (see module doc). `sync_cache`: where a model
    downloaded on this machine is kept (None: the Hugging Face default)."""

    simulated = False

    def __init__(
        self,
        inventory: Sequence[InventoryNode],
        *,
        accept_new_host_keys: bool = False,
        sync_cache: Path | None = None,
    ) -> None:
        self.inventory = list(inventory)
        self.accept_new_host_keys = accept_new_host_keys
        self.sync_cache = sync_cache
        self._pool: ConnectionPool | None = None
        self._confirm: ConfirmKey | None = None
        self._probe_dockers: ProbeDockers | None = None

    @property
    def pool(self) -> ConnectionPool:
        if self._pool is None:
            raise RuntimeError("the nodes are not open yet")
        return self._pool

    def sync_env(self) -> dict[str, str]:
        """The environment a model download sees (HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE)."""
        return dict(os.environ)

    async def start(self) -> None:
        """Real nodes are up already."""

    async def open(self, *, strict: bool, confirm: ConfirmKey) -> None:
        self._confirm = confirm
        if self._pool is None:
            from spark_tui.remote.ssh import ConnectionPool

            self._pool = ConnectionPool(
                self.inventory,
                accept_new_host_keys=self.accept_new_host_keys,
                confirm=self._ask_host_key,
            )
        # Opens every node; on later calls reconnects the ones that dropped.
        await self._pool.open(partial=not strict)

    async def _ask_host_key(self, host: str, fingerprint: str) -> bool:
        # The pool keeps this callback; the question goes to whoever opened the nodes last.
        return self._confirm is not None and await self._confirm(host, fingerprint)

    async def probe(self) -> list[NodeFacts]:
        from spark_tui.remote.probe import ProbeDockers, probe_pool

        # A probe again (the cockpit's `r`, a launch's) reuses the connections and the
        # Docker clients of the one before.
        if self._probe_dockers is None:
            self._probe_dockers = ProbeDockers()
        return list(await probe_pool(self.pool, partial=True, dockers=self._probe_dockers))

    async def _kept_dockers(self) -> dict[str, RemoteDocker]:
        """The Docker client the probes keep for every reachable node (opened now where
        none is): a launch's status and its ranks reuse them rather than open each node's
        socket again (a forward and a ping per node, before the head's container)."""
        from spark_tui.remote.probe import ProbeDockers
        from spark_tui.remote.ssh import combine_errors

        if self._probe_dockers is None:
            self._probe_dockers = ProbeDockers()
        kept = self._probe_dockers
        conns = self.pool.reachable
        got = await asyncio.gather(*(kept.get(c) for c in conns), return_exceptions=True)
        failed = [g for g in got if isinstance(g, SparkError)]
        if failed:
            raise combine_errors(failed, len(conns))
        for res in got:
            if isinstance(res, BaseException):
                raise res
        return {
            c.name: d for c, d in zip(conns, got, strict=True) if not isinstance(d, BaseException)
        }

    async def status(self) -> list[ClusterStatus]:
        from spark_tui.ops.cluster import status

        return list(await status(self.pool, dockers=await self._kept_dockers()))

    async def diagnose(self, cluster: ClusterStatus, cleanup: str | None) -> ClusterDiagnosis:
        from spark_tui.ops.cluster import close_dockers, open_dockers
        from spark_tui.ops.diagnose import diagnose

        dockers = await open_dockers(self.pool)
        try:
            return await diagnose(cluster, dockers, cleanup=cleanup, pool=self.pool)
        finally:
            await close_dockers(dockers)

    def start_flag_table(self, head: str, image: str, cluster_id: str) -> None:
        if self._pool is None:
            return
        from spark_tui.ops.image_flags import start_flag_table

        start_flag_table(self._pool, head, image, cluster_id)

    def hold_flag_tables(self) -> Callable[[], None]:
        if self._pool is None:
            return lambda: None  # not open: no build has begun
        from spark_tui.ops.image_flags import FlagTables

        return FlagTables.of(self._pool).hold()

    async def image_flags(
        self, plan: LaunchPlan, *, pull: bool, emit: Emit[ev.Notice] | None, wait: bool = True
    ) -> list[Finding]:
        from spark_tui.ops.image_flags import plan_flag_findings

        return list(await plan_flag_findings(self.pool, plan, pull=pull, emit=emit, wait=wait))

    async def abandon_flag_table(self, cluster_id: str) -> None:
        if self._pool is None:
            return
        from spark_tui.ops.image_flags import FlagTables

        await FlagTables.of(self._pool).abandon(cluster_id)

    async def launch(
        self,
        plan: LaunchPlan,
        replace_stale: ReplaceStale,
        *,
        keep_failed: bool,
        wait_ready: bool,
        follow: bool,
        ready_timeout: float,
        emit: Emit[ev.ClusterEvent],
    ) -> None:
        from spark_tui.ops.launch import launch

        await launch(
            plan,
            self.pool,
            dockers=await self._kept_dockers(),
            replace_stale=replace_stale,
            keep_failed=keep_failed,
            wait_ready=wait_ready,
            follow=follow,
            ready_timeout=ready_timeout,
            emit=emit,
        )

    async def attach(
        self, cluster_id: str, *, keep_failed: bool, emit: Emit[ev.ClusterEvent]
    ) -> None:
        from spark_tui.ops.attach import attach

        await attach(self.pool, cluster_id, keep_failed=keep_failed, emit=emit)

    async def watch(
        self,
        cluster_id: str | None,
        *,
        interval: float,
        request_timeout: float,
        cleanup: str | None,
        emit: Emit[ev.WatchSample],
    ) -> None:
        from spark_tui.ops.watch import watch

        await watch(
            self.pool,
            cluster_id,
            interval=interval,
            request_timeout=request_timeout,
            cleanup=cleanup,
            emit=emit,
        )

    async def sample_link(
        self,
        cluster_id: str | None,
        emit: Emit[ev.LinkSample | ev.NodeNotAnswering],
        *,
        interval: float,
        stop: asyncio.Event,
    ) -> None:
        from spark_tui.ops.link import sample_link

        await sample_link(self.pool, cluster_id, emit, interval=interval, stop=stop)

    async def rank_log(
        self, rank: RankStatus, *, tail: int | None, follow: bool, emit: Emit[ev.LogEvent]
    ) -> None:
        from spark_tui.ops.logs import rank_log

        await rank_log(self.pool, rank, tail=tail, follow=follow, emit=emit)

    async def stop(self, cluster_id: str | None, emit: Emit[ev.StopUpdate] | None) -> StopReport:
        from spark_tui.ops.cluster import stop

        return await stop(self.pool, cluster_id, emit=emit)

    async def find_api(self, cluster_id: str | None = None) -> FoundCluster:
        from spark_tui.ops.attach import find_api

        return await find_api(self.pool, cluster_id)

    async def smoke_checks(
        self, target: ApiTarget, timeout: float, emit: Emit[SmokeResult]
    ) -> list[SmokeResult]:
        from spark_tui.ops.smoke import run_smoke

        return await run_smoke(
            target.base_url,
            target.model,
            expect_reasoning=target.expect_reasoning,
            tool_call_parser=target.tool_call_parser,
            timeout=timeout,
            emit=emit,
        )

    def bench_run(
        self, target: ApiTarget, config: BenchConfig, emit: Emit[BenchUpdate]
    ) -> BenchRunning:
        from spark_tui.ops.bench import BenchRun

        transport = None
        if target.head_api is not None and self._pool is not None:
            from spark_tui.remote.ssh_http import ChannelTransport

            # Channels of the head's open connection, not the forward's local port: a
            # relay through a local socket is not on the path the first token is timed on.
            node, host, port = target.head_api
            conn = self._pool[node]
            transport = ChannelTransport(
                lambda: conn.open_tcp(host, port), max_connections=config.max_connections
            )
        return BenchRun(target.base_url, target.model, config, emit=emit, transport=transport)

    async def model_sync(
        self,
        facts: Sequence[NodeFacts],
        recipe_name: str,
        needs: Sequence[ModelNeed],
        where: str,
        *,
        emit: Emit[ev.SyncUpdate],
    ) -> bool:
        from spark_tui.ops.model_sync import ModelSync

        run = ModelSync(
            self.pool,
            facts,
            recipe_name,
            env=self.sync_env(),
            where=where,
            local_cache=self.sync_cache,
        )
        return await run.run(list(needs), emit)

    async def image_sync(
        self, facts: Sequence[NodeFacts], image: str, *, emit: Emit[ev.SyncUpdate]
    ) -> bool:
        from spark_tui.ops.image_sync import ImageSync

        return await ImageSync(self.pool, facts, image).run(emit)

    async def close(self) -> None:
        if self._pool is not None:
            from spark_tui.ops.image_flags import FlagTables

            # Their help containers are removed over the pool's connections: first.
            await FlagTables.of(self._pool).close()
            if self._probe_dockers is not None:
                await self._probe_dockers.close()
            await self._pool.close()

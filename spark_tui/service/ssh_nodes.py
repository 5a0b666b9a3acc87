"""The product's `Nodes`: real Sparks over SSH (one asyncssh connection per node, reused),
the operations of `spark_tui.ops` run on that pool."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from spark_tui.service.nodes import BenchRunning, ConfirmKey, ReplaceStale, Sink

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.fit import Finding
    from spark_tui.core.inventory import InventoryNode
    from spark_tui.core.model_presence import ModelNeed
    from spark_tui.core.plan import LaunchPlan
    from spark_tui.ops.attach import FoundCluster
    from spark_tui.ops.bench import BenchConfig, BenchProgress, LevelResult
    from spark_tui.ops.cluster import ClusterStatus, RankStatus, StopReport
    from spark_tui.ops.diagnose import ClusterDiagnosis
    from spark_tui.ops.smoke import SmokeResult
    from spark_tui.remote.ssh import ConnectionPool
    from spark_tui.service import events as ev
    from spark_tui.service.api import ApiTarget


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
        from spark_tui.remote.probe import probe_pool

        return list(await probe_pool(self.pool, partial=True))

    async def status(self) -> list[ClusterStatus]:
        from spark_tui.ops.cluster import status

        return list(await status(self.pool))

    async def diagnose(self, cluster: ClusterStatus, cleanup: str | None) -> ClusterDiagnosis:
        from spark_tui.ops.cluster import close_dockers, open_dockers
        from spark_tui.ops.diagnose import diagnose

        dockers = await open_dockers(self.pool)
        try:
            return await diagnose(cluster, dockers, cleanup=cleanup, pool=self.pool)
        finally:
            await close_dockers(dockers)

    def start_flag_table(self, head: str, image: str) -> None:
        if self._pool is None:
            return
        from spark_tui.ops.image_flags import start_flag_table

        start_flag_table(self._pool, head, image)

    async def image_flags(
        self, plan: LaunchPlan, *, pull: Callable[[str], None] | None
    ) -> list[Finding]:
        from spark_tui.ops.image_flags import plan_flag_findings

        return list(await plan_flag_findings(self.pool, plan, pull=pull))

    def launch_events(
        self,
        plan: LaunchPlan,
        replace_stale: ReplaceStale,
        *,
        keep_failed: bool,
        wait_ready: bool,
        follow: bool,
        ready_timeout: float,
    ) -> AsyncIterator[ev.ClusterEvent]:
        from spark_tui.ops.launch import launch

        return launch(
            plan,
            self.pool,
            replace_stale=replace_stale,
            keep_failed=keep_failed,
            wait_ready=wait_ready,
            follow=follow,
            ready_timeout=ready_timeout,
        )

    def attach_events(
        self, cluster_id: str, *, keep_failed: bool
    ) -> AsyncIterator[ev.ClusterEvent]:
        from spark_tui.ops.attach import attach

        events: AsyncIterator[ev.ClusterEvent] = attach(
            self.pool, cluster_id, keep_failed=keep_failed
        )
        return events

    def watch_events(
        self,
        cluster_id: str | None,
        *,
        interval: float,
        request_timeout: float,
        cleanup: str | None,
    ) -> AsyncIterator[ev.WatchSample]:
        from spark_tui.ops.watch import watch

        return watch(
            self.pool,
            cluster_id,
            interval=interval,
            request_timeout=request_timeout,
            cleanup=cleanup,
        )

    async def sample_link(
        self,
        cluster_id: str | None,
        emit: Callable[[ev.LinkSample | ev.NodeNotAnswering], None],
        *,
        interval: float,
        stop: asyncio.Event,
    ) -> None:
        from spark_tui.ops.link import sample_link

        await sample_link(self.pool, cluster_id, emit, interval=interval, stop=stop)

    def rank_log(
        self, rank: RankStatus, *, tail: int | None, follow: bool
    ) -> AsyncIterator[ev.LogEvent]:
        from spark_tui.ops.logs import rank_log

        return rank_log(self.pool, rank, tail=tail, follow=follow)

    async def stop(self, cluster_id: str | None, emit: Sink | None) -> StopReport:
        from spark_tui.ops.cluster import stop

        return await stop(self.pool, cluster_id, emit=emit)

    async def find_api(self) -> FoundCluster:
        from spark_tui.ops.attach import find_api

        return await find_api(self.pool)

    def smoke_checks(self, target: ApiTarget, timeout: float) -> AsyncIterator[SmokeResult]:
        from spark_tui.ops.smoke import iter_smoke

        return iter_smoke(
            target.base_url,
            target.model,
            expect_reasoning=target.expect_reasoning,
            tool_call_parser=target.tool_call_parser,
            timeout=timeout,
        )

    def bench_run(
        self,
        target: ApiTarget,
        config: BenchConfig,
        progress: Callable[[BenchProgress], None],
        on_level: Callable[[LevelResult], None],
    ) -> BenchRunning:
        from spark_tui.ops.bench import BenchRun

        return BenchRun(target.base_url, target.model, config, progress=progress, on_level=on_level)

    def model_sync_events(
        self, facts: Sequence[NodeFacts], recipe_name: str, needs: Sequence[ModelNeed], where: str
    ) -> AsyncIterator[ev.SyncUpdate]:
        from spark_tui.ops.model_sync import ModelSync

        run = ModelSync(
            self.pool,
            facts,
            recipe_name,
            env=self.sync_env(),
            where=where,
            local_cache=self.sync_cache,
        )
        return run.run(list(needs))

    def image_sync_events(
        self, facts: Sequence[NodeFacts], image: str
    ) -> AsyncIterator[ev.SyncUpdate]:
        from spark_tui.ops.image_sync import ImageSync

        return ImageSync(self.pool, facts, image).run()

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()

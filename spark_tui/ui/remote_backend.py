"""The cockpit's backends: real Sparks over SSH, and the demo's simulated Sparks (reached
over SSH in exactly the same way once they are started)."""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import SparkError
from spark_tui.ui.backend import NodeProbe, RunningCluster

if TYPE_CHECKING:  # annotations only: the domain is not needed before the first frame
    from spark_tui.core.inventory import InventoryNode
    from spark_tui.core.plan import LaunchPlan
    from spark_tui.ops.events import Event
    from spark_tui.ui.backend import HostKeyConfirm, Progress


class RemoteBackend:
    """Real nodes from an inventory or --hosts: one SSH connection each, reused."""

    simulated = False

    def __init__(
        self,
        nodes: list[InventoryNode],
        *,
        accept_new_host_keys: bool = False,
        label: str | None = None,
        target_args: str | None = None,
    ) -> None:
        self.inventory = nodes
        self.accept_new_host_keys = accept_new_host_keys
        self.label = label or f"{len(nodes)} nodes: " + ", ".join(n.name for n in nodes)
        target = target_args or "--hosts " + shlex.quote(",".join(n.host for n in nodes))
        self.reattach_hint = (
            f"`spark-tui {target}` (it re-attaches), or `spark-tui status {target}`"
        )
        self.pool: Any = None
        self._confirm: HostKeyConfirm | None = None
        # Set by the cockpit: asks the user before stale containers of ours are removed.
        self.stale_confirm: Callable[[str], Awaitable[bool]] | None = None

    async def start(self) -> None:
        """Nothing to start for real nodes."""

    async def _open(self, confirm: HostKeyConfirm | None) -> None:
        from spark_tui.remote.ssh import ConnectionPool

        if self.pool is not None:
            await self.pool.open(partial=True)  # reconnects the ones that dropped
            return
        self.pool = ConnectionPool(
            self.inventory, accept_new_host_keys=self.accept_new_host_keys, confirm=confirm
        )
        await self.pool.open(partial=True)

    async def discover(self, confirm: HostKeyConfirm) -> list[NodeProbe]:
        self._confirm = confirm
        await self._open(confirm)
        return await self.refresh()

    async def refresh(self) -> list[NodeProbe]:
        from spark_tui.remote.probe import probe_pool

        if self.pool is None:
            await self._open(self._confirm)
        elif self.pool.errors:
            await self.pool.open(partial=True)
        facts = await probe_pool(self.pool, partial=True)
        probes = []
        for node in facts:
            if node.errors and node.memory_total_bytes is None:
                message, _, remedy = node.errors[0].partition(" (remedy: ")
                probes.append(NodeProbe(node.name, None, message, remedy.rstrip(")") or None))
            else:
                probes.append(NodeProbe(node.name, node))
        return probes

    def launch(self, plan: LaunchPlan) -> AsyncIterator[Event]:
        from spark_tui.ops.launch import launch

        return launch(plan, self.pool, keep_failed=False, replace_stale=self._confirm_stale)

    async def _confirm_stale(self, stale: list[Any]) -> bool:
        """Containers of an earlier spark-tui cluster hold the ranks' names: ask first."""
        if self.stale_confirm is None:
            return False
        names = ", ".join(f"{getattr(s, 'name', s)} on {getattr(s, 'node', '?')}" for s in stale)
        return await self.stale_confirm(names)

    def attach(self, cluster_id: str) -> AsyncIterator[Event]:
        from spark_tui.ops.attach import attach

        return attach(self.pool, cluster_id)  # type: ignore[no-any-return]

    async def running(self) -> RunningCluster | None:
        from spark_tui.ops.cluster import status

        clusters = await status(self.pool)
        live = [c for c in clusters if c.running]
        if not live:
            return None
        cluster = live[0]
        ranks = [{"rank": r.rank, "node": r.node} for r in cluster.ranks]
        return RunningCluster(cluster.cluster_id, cluster.recipe, ranks)

    async def stop(self, cluster_id: str) -> list[str]:
        from spark_tui.ops.cluster import stop

        report = await stop(self.pool, cluster_id)  # raises OperationFailed if any is left
        return [f"{name} on {node}" for node, name in report.left]

    async def smoke(self, base_url: str, model: str | None) -> list[dict[str, Any]]:
        from spark_tui.ops.smoke import run_smoke

        results = await run_smoke(base_url, model)
        return [r.to_dict() for r in results]

    async def bench(
        self, base_url: str, model: str | None, concurrency: list[int], progress: Progress
    ) -> dict[str, Any]:
        from spark_tui.ops.bench import BenchConfig, run_bench

        config = BenchConfig(concurrency=tuple(concurrency), prompt_tokens=256, output_tokens=64)

        def report(p: Any) -> None:
            progress(
                f"benchmark: concurrency {p.concurrency} ({p.level_index + 1}/{p.levels}), "
                f"{p.done}/{p.total} requests, {p.errors} errors, {p.elapsed_s:.0f} s"
            )

        result = await run_bench(base_url, model, config, progress=report)
        return result.to_dict()  # type: ignore[no-any-return]

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()


class DemoBackend(RemoteBackend):
    """Simulated Sparks started in this process, then reached over SSH like real ones."""

    simulated = True

    def __init__(
        self,
        *,
        nodes: int = 2,
        memory_gb: int = 128,
        pace: float = 0.5,
        token_scale: float = 1.0,
        worker_dies_after: float | None = None,
        page_cache_gb: float = 0.0,
        state_dir: Path | None = None,
    ) -> None:
        super().__init__([], label=f"DEMO · {nodes} simulated {memory_gb} GB Sparks (no GPU)")
        self.reattach_hint = "the simulated Sparks end with the demo"
        self.scenario_args: dict[str, Any] = dict(
            nodes=nodes,
            memory_gb=memory_gb,
            pace=pace,
            token_scale=token_scale,
            worker_dies_after=worker_dies_after,
            page_cache_gb=page_cache_gb,
            ssh_port=0,
        )
        self.state_dir = state_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.cluster: Any = None

    async def start(self) -> None:
        if self.cluster is not None:
            return
        from spark_tui.sim.nodes import Scenario, SimCluster

        if self.state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="spark-tui-demo-")
            self.state_dir = Path(self._tmp.name)
        # Free loopback addresses (127.0.0.11, .12, ... when nobody holds them), so another
        # demo or `spark-tui sim` never shares them; a loop of their own beside Textual's.
        cluster = SimCluster(
            Scenario(**self.scenario_args),
            state_dir=self.state_dir,
            free_addresses=True,
            own_loop=True,
        )
        try:
            await cluster.start()
        except OSError as exc:
            raise SparkError(
                f"could not start the simulated Sparks: {exc}",
                "free some loopback addresses 127.x.y.z (stop other demos or `spark-tui sim`), "
                "then run `spark-tui demo` again",
            ) from None
        self.cluster = cluster
        self.inventory = list(self.cluster.inventory)

    async def refresh(self) -> list[NodeProbe]:
        from dataclasses import replace

        from spark_tui.sim.nodes.remedies import UNREACHABLE_IN_DEMO

        # A real node's remedies (ping it, check its sshd) do not apply to a simulated one.
        probes = await super().refresh()
        return [replace(p, remedy=UNREACHABLE_IN_DEMO) if p.error else p for p in probes]

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            if self.cluster is not None:
                await self.cluster.close()
                self.cluster = None
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

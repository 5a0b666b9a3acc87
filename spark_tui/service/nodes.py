"""The one seam between the session and the world: everything that reaches the nodes or the
API. The product's implementation is `service.ssh_nodes.SshNodes` (the SSH connection pool
and the operations); the demo's runs the same over simulated Sparks; the tests' doubles
implement it with recordings or local engines. Every action of the service runs the same
code over any of them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.fit import Finding
    from spark_tui.core.inventory import InventoryNode
    from spark_tui.core.model_presence import ModelNeed
    from spark_tui.core.plan import LaunchPlan
    from spark_tui.ops.attach import FoundCluster
    from spark_tui.ops.bench import BenchConfig, BenchResult, BenchUpdate
    from spark_tui.ops.cluster import ClusterStatus, RankStatus, StopReport
    from spark_tui.ops.diagnose import ClusterDiagnosis
    from spark_tui.ops.events import Emit
    from spark_tui.ops.launch import StaleContainer
    from spark_tui.ops.smoke import SmokeResult
    from spark_tui.service import events as ev
    from spark_tui.service.api import ApiTarget

# The pool's question about an unknown host key: (host, fingerprint) -> trust it?
ConfirmKey = Callable[[str, str], Awaitable[bool]]
# A launch's question about containers of an earlier run holding the ranks' names.
ReplaceStale = Callable[[list["StaleContainer"]], Awaitable[bool]]


class BenchRunning(Protocol):
    """A benchmark sweep under way: `run()` measures, `result` holds what finished so far
    (also after a cancellation)."""

    result: BenchResult

    async def run(self) -> BenchResult: ...


class Nodes(Protocol):
    """The nodes of a session and the API on them (see module doc)."""

    inventory: list[InventoryNode]
    # Simulated Sparks (the demo, the tests): the interfaces say so.
    simulated: bool

    async def start(self) -> None:
        """Bring up what the nodes need before the first `open` (simulated Sparks)."""

    def sync_env(self) -> dict[str, str]:
        """The environment the Hub is asked with and a model download sees (HF_TOKEN,
        HF_ENDPOINT, HF_HUB_OFFLINE)."""

    async def open(self, *, strict: bool, confirm: ConfirmKey) -> None:
        """Connect (again) to every node; `strict`: an unreachable node is an error."""

    async def probe(self) -> list[NodeFacts]:
        """Every node's facts (an unreachable node's facts carry its error)."""

    async def status(self) -> list[ClusterStatus]:
        """Our clusters on the nodes, from their containers' labels."""

    async def diagnose(self, cluster: ClusterStatus, cleanup: str | None) -> ClusterDiagnosis:
        """Why a cluster is down (which rank failed, its lines, the head's)."""

    def start_flag_table(self, head: str, image: str, cluster_id: str) -> None:
        """Start building `image`'s flag table on `head` in the background, so the flag
        check awaits a table built while the nodes are probed (nothing while not open);
        its help run's container belongs to `cluster_id` (`stop` of it removes it)."""

    def hold_flag_tables(self) -> Callable[[], None]:
        """Hold the help runs of the flag table builds from starting until the returned
        call (once is enough): a launch holds them from its beginning until its ranks have
        started, however it ends (its help container's start made the head's wait in
        dockerd, and its imports take both cores of a small head)."""

    async def image_flags(
        self, plan: LaunchPlan, *, pull: bool, emit: Emit[ev.Notice] | None, wait: bool = True
    ) -> list[Finding]:
        """The plan's argv checked against its image's own vLLM on the head; `pull`: pull a
        missing image first, its progress as notices to `emit`; not `wait`: when the table
        needs the image's `vllm serve --help=all` run in a container of the plan's
        cluster, a `flags_pending` note at once (the run goes on; a later call waits)."""

    async def abandon_flag_table(self, cluster_id: str) -> None:
        """Give up the flag table builds whose help run belongs to `cluster_id` and wait
        until their containers are removed (its launch failed or was interrupted)."""

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
        """Start the plan's ranks and follow them (see `ops.launch`)."""

    async def attach(
        self, cluster_id: str, *, keep_failed: bool, emit: Emit[ev.ClusterEvent]
    ) -> None:
        """Follow a running cluster of ours (see `ops.attach`); a failure removes the other
        ranks unless `keep_failed`."""

    async def watch(
        self,
        cluster_id: str | None,
        *,
        interval: float,
        request_timeout: float,
        cleanup: str | None,
        emit: Emit[ev.WatchSample],
    ) -> None:
        """Sample a ready cluster until it fails (see `ops.watch`)."""

    async def sample_link(
        self,
        cluster_id: str | None,
        emit: Emit[ev.LinkSample | ev.NodeNotAnswering],
        *,
        interval: float,
        stop: asyncio.Event,
    ) -> None:
        """Sample the cluster's nodes (memory, their ranks' interfaces' traffic) every
        `interval` seconds over the open connections until cancelled, or once more after
        `stop` is set (see `ops.link`)."""

    async def rank_log(
        self, rank: RankStatus, *, tail: int | None, follow: bool, emit: Emit[ev.LogEvent]
    ) -> None:
        """One rank's log: `RankLogRecord`s, and while following `NodeUnreachable` /
        `NodeReachable` across dropped connections, then `RankLogEnded` (see `ops.logs`)."""

    async def stop(self, cluster_id: str | None, emit: Emit[ev.StopUpdate] | None) -> StopReport:
        """Remove every rank's container of `cluster_id` (else of all our clusters)."""

    async def find_api(self, cluster_id: str | None = None) -> FoundCluster:
        """The running cluster's API (`cluster_id`'s, else the only one's) through a
        forward (valid while the nodes are open)."""

    async def smoke_checks(
        self, target: ApiTarget, timeout: float, emit: Emit[SmokeResult]
    ) -> list[SmokeResult]:
        """Every smoke check against the API, each result to `emit` as it is known."""

    def bench_run(
        self, target: ApiTarget, config: BenchConfig, emit: Emit[BenchUpdate]
    ) -> BenchRunning:
        """A benchmark sweep of the API, not started yet; `emit` gets its progress and
        levels while it runs."""

    async def model_sync(
        self,
        facts: Sequence[NodeFacts],
        recipe_name: str,
        needs: Sequence[ModelNeed],
        where: str,
        *,
        emit: Emit[ev.SyncUpdate],
    ) -> bool:
        """Put the models on every node (see `ops.model_sync`); True when complete."""

    async def image_sync(
        self, facts: Sequence[NodeFacts], image: str, *, emit: Emit[ev.SyncUpdate]
    ) -> bool:
        """Put the head's image on every node (see `ops.image_sync`); True when complete."""

    async def close(self) -> None:
        """Close every connection (and end what `start` brought up)."""

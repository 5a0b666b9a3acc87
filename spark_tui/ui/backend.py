"""What the cockpit needs from the world, as one interface with two implementations:
real Sparks over SSH (`RemoteBackend`) and the simulated Sparks of the demo (`DemoBackend`,
which starts simulated nodes and then talks to them over SSH exactly like real ones)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # annotations only: importing the domain here would slow the first frame
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.plan import LaunchPlan
    from spark_tui.ops.events import Event

# (host, sha256 fingerprint) -> trust it?
HostKeyConfirm = Callable[[str, str], Awaitable[bool]]
Progress = Callable[[str], None]


@dataclass
class NodeProbe:
    """One node's probe outcome: facts, or an error with its remedy."""

    name: str
    facts: NodeFacts | None = None
    error: str | None = None
    remedy: str | None = None


@dataclass
class RunningCluster:
    """A cluster of ours found on the nodes (to re-attach after a restart)."""

    cluster_id: str
    recipe: str
    ranks: list[dict[str, Any]] = field(default_factory=list)


class Backend(Protocol):
    """The operations the cockpit performs; every call is async and raises SparkError."""

    simulated: bool
    label: str
    reattach_hint: str

    async def start(self) -> None: ...
    async def discover(self, confirm: HostKeyConfirm) -> list[NodeProbe]: ...
    async def refresh(self) -> list[NodeProbe]: ...
    def launch(self, plan: LaunchPlan) -> AsyncIterator[Event]: ...
    def attach(self, cluster_id: str) -> AsyncIterator[Event]: ...
    async def running(self) -> RunningCluster | None: ...
    async def stop(self, cluster_id: str) -> list[str]: ...
    async def smoke(self, base_url: str, model: str | None) -> list[dict[str, Any]]: ...
    async def bench(
        self, base_url: str, model: str | None, concurrency: list[int], progress: Progress
    ) -> dict[str, Any]: ...
    async def close(self) -> None: ...

"""Every event the operations emit: a launch's and an attach's (rank states, log lines,
notices, ready, outages, the Ray cluster forming), the watch's samples and alerts, link and memory samples, and the
model and image syncs' steps and progress, and `Emit`: the one way an operation hands them
over.

The interfaces never import this module: `service.events` is their vocabulary, these
events included (the operations sit below the service and cannot import it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias, TypeVar

from spark_tui.core.link import InterfaceRate

E = TypeVar("E")
# How an operation that reports progress hands over each event of its union, in order, while
# it runs: its `emit` parameter (`Emit[ClusterEvent]`, `Emit[BenchUpdate]`, ...). The
# operation returns its result; only the service turns what is emitted into a stream.
Emit: TypeAlias = Callable[[E], None]


class RankState(StrEnum):
    """Lifecycle of one rank's container."""

    CREATED = "created"
    STARTING = "starting"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class RankStateChanged:
    """A rank moved to a new state; `progress` is 0..1 while loading, `reason` when failed."""

    rank: int
    node: str
    state: RankState
    progress: float | None = None
    reason: str | None = None
    explaining_lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class LogLine:
    """One line of a rank's log, with its classification (see core.logclass)."""

    rank: int
    node: str
    text: str
    kind: str = "info"
    timestamp: str | None = None
    detail: str | None = None  # see core.logclass.LineClass
    scope: str | None = None


@dataclass(frozen=True)
class Notice:
    """Something the user should read: a warning, a step taken, an error with its remedy."""

    level: str  # "info" | "warning" | "error"
    message: str
    remedy: str | None = None


@dataclass(frozen=True)
class ClusterReady:
    """Every rank is ready and the API answered /health through the forward."""

    cluster_id: str
    base_url: str


@dataclass(frozen=True)
class ResultEvent:
    """A finished smoke check or benchmark level; `payload` is its JSON-able result."""

    kind: str  # "smoke" | "bench"
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeUnreachable:
    """A node's SSH link is down and spark-tui keeps re-opening it (capped backoff); its
    ranks are not failed for it. Sent after every failed attempt. `ask` turns True once
    the outage has lasted long enough to ask the user; `give_up()` stops waiting (the
    watch then ends with UnreachableError and leaves every rank as it is)."""

    node: str
    ranks: tuple[int, ...]
    seconds: float  # unreachable for this long so far
    attempts: int
    retry_in: float  # seconds until the next attempt
    reason: str
    remedy: str
    ask: bool = False
    _give_up: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        return f"{self.node} unreachable since {self.seconds:.0f} s, retrying: {self.reason}"

    def give_up(self) -> None:
        """Stop waiting for this node (the ranks are left running)."""
        if self._give_up is not None:
            self._give_up()


@dataclass(frozen=True)
class NodeReachable:
    """A node answers again after an outage; its ranks' logs resume where they broke."""

    node: str
    ranks: tuple[int, ...]
    outage_seconds: float


@dataclass(frozen=True)
class RankLogRecord:
    """One line of a rank's container log as Docker keeps it (`ts_ns`: its timestamp, 0
    when Docker gave none)."""

    rank: int
    node: str
    text: str
    ts_ns: int = 0


@dataclass(frozen=True)
class RankLogEnded:
    """A followed rank's container ended: its log has no more lines."""

    rank: int
    node: str
    container: str


@dataclass(frozen=True)
class RayClusterState:
    """The Ray cluster of a vllm-ray launch while it forms: nodes joined and total resources.

    Emitted each time `ray status` on the head shows a change; `formed` once every node of
    the plan has joined (the serve command is started then). `resources` are Ray's totals
    (CPU, GPU, memory and object_store_memory in bytes, ...).
    """

    cluster_id: str
    nodes_joined: int
    nodes_expected: int
    resources: dict[str, float] = field(default_factory=dict)
    formed: bool = False


@dataclass(frozen=True)
class WatchStarted:
    """The watch found its cluster and reaches the head's API through `base_url`."""

    cluster_id: str
    recipe: str | None
    nodes: tuple[str, ...]
    base_url: str


@dataclass(frozen=True)
class ProbeResult:
    """One tiny request (1 token of chat/completions) through the forward.

    `ok` is False on an error answer or no token within the timeout (`status` None): a head
    whose /health still says 200 but that gives no token is hung, as real vLLM shows.
    """

    ok: bool
    latency_s: float
    status: int | None = None
    error: str | None = None
    timed_out: bool = False


@dataclass(frozen=True)
class ServiceGauges:
    """The head's /metrics: running and waiting requests, KV cache use (0..1), tokens/s.

    A figure is None when the server does not export it; the rates need two samples.
    """

    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    generation_tokens_per_s: float | None = None
    prompt_tokens_per_s: float | None = None


@dataclass(frozen=True)
class NodeMemory:
    """A node's memory from /proc/meminfo, in bytes."""

    node: str
    total: int | None
    available: int | None


@dataclass(frozen=True)
class LinkSample:
    """One sample of a node while a benchmark or the watch runs: its memory in bytes and
    the traffic of the interfaces its ranks use (NCCL/Gloo) since its previous sample
    (rates None on the first); `missing`: interfaces the ranks name that the node lacks."""

    node: str
    mem_total: int | None
    mem_available: int | None
    interfaces: tuple[InterfaceRate, ...] = ()
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class RankContainer:
    """One rank's container as Docker reports it (`state`: running, exited, ...)."""

    rank: int
    node: str
    container: str
    state: str
    status: str


@dataclass(frozen=True)
class ContainerStates:
    """The containers of every rank at one moment (a rank with no container is missing)."""

    ranks: tuple[RankContainer, ...]
    missing: tuple[int, ...] = ()


@dataclass(frozen=True)
class NodeNotAnswering:
    """A node did not answer this round of samples: a state the watch keeps retrying, never a failure."""

    node: str
    since_s: float
    message: str


@dataclass(frozen=True)
class WatchAlert:
    """The cluster failed while watched: the rank that went first, why, its lines.

    After a worker's death `head_lines` are the head's explaining lines. `cleanup` is the
    exact command that removes what is left.
    """

    rank: int
    node: str
    reason: str
    lines: tuple[str, ...] = ()
    head_lines: tuple[str, ...] = ()
    others: tuple[str, ...] = ()  # "rank N on NODE REASON" of the ranks that went after it
    cleanup: str | None = None


# vLLM logs its whole config on one line (several KB): an alert shows the start of a line.
ALERT_LINE_CHARS = 300


def alert_line(line: str) -> str:
    """A log line as an alert shows it: stripped, and cut (saying how much) when long."""
    text = line.strip()
    if len(text) <= ALERT_LINE_CHARS:
        return text
    return f"{text[:ALERT_LINE_CHARS]}… ({len(text) - ALERT_LINE_CHARS} more characters)"


@dataclass(frozen=True)
class SyncStep:
    """A sync's step taken: `action` is e.g. "check", "download", "copy", "pull", "load"."""

    node: str
    item: str  # a model id or an image reference
    action: str
    message: str


@dataclass(frozen=True)
class SyncProgress:
    """How far one transfer of a sync to `node` is: `total_bytes` None when not known."""

    node: str
    item: str
    action: str
    done_bytes: int
    total_bytes: int | None
    rate_bytes_per_s: float | None = None
    eta_seconds: float | None = None

    @property
    def fraction(self) -> float | None:
        if not self.total_bytes:
            return None
        return min(1.0, self.done_bytes / self.total_bytes)


@dataclass(frozen=True)
class SyncDone:
    """`item` is complete on `node`: `sent_bytes` went over the wire, `skipped` files were
    there already; `source` is where it came from ("" when nothing had to be sent)."""

    node: str
    item: str
    sent_bytes: int = 0
    skipped: int = 0
    source: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class SyncFinished:
    """The end of a sync: `ok` when every item is complete on every node."""

    ok: bool
    items: tuple[str, ...] = ()
    failed_nodes: tuple[str, ...] = ()


# What a watch emits: one sample each (its start, the tiny request, the /metrics gauges, a
# node's memory, the containers, a node that did not answer), then the alert that ends it.
WatchSample = (
    WatchStarted
    | ProbeResult
    | ServiceGauges
    | NodeMemory
    | LinkSample
    | ContainerStates
    | NodeNotAnswering
    | WatchAlert
)

# What following a rank's log gives (outages and resumes included).
LogEvent = RankLogRecord | RankLogEnded | NodeUnreachable | NodeReachable

# What following a cluster's ranks gives (a launch, an attach, a stop's removals).
ClusterEvent = (
    RankStateChanged
    | LogLine
    | Notice
    | ClusterReady
    | ResultEvent
    | NodeUnreachable
    | NodeReachable
    | RayClusterState
)

# What a stop emits while it removes the ranks: each rank stopped, a rank killed, an error.
StopUpdate = RankStateChanged | Notice

# What a model or image sync emits: its steps, progress, per-node results, notices for
# warnings and errors (with their remedy), and one SyncFinished at the end.
SyncUpdate = SyncStep | SyncProgress | SyncDone | SyncFinished | Notice

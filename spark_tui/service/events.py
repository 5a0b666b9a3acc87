"""The events of the service's actions: the one vocabulary the CLI and the cockpit render.

Each action streams one typed union of them (`LaunchEvent`, `WatchEvent`, `SyncEvent`, ...;
see the end of this module). The operations' events (rank states, log lines, notices, ready,
outages, the Ray cluster forming, the watch's samples and alert, the syncs' steps and
progress) are defined in `ops.events`, below the service, and belong to this vocabulary
unchanged: the interfaces take them from here, never from the operations. The service adds
what a whole action produces (a probe, an evaluation, an endpoint, a smoke check, a benchmark
level, a record in the history, a comparison, a stop, a sync's start) and `Question`, which
the consumer answers with `reply()` before it asks for the next event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_tui.ops.events import (
    ClusterEvent,
    ClusterReady,
    ContainerStates,
    LinkSample,
    LogEvent,
    LogLine,
    NodeMemory,
    NodeNotAnswering,
    NodeReachable,
    NodeUnreachable,
    Notice,
    ProbeResult,
    RankContainer,
    RankLogEnded,
    RankLogRecord,
    RankState,
    RankStateChanged,
    RayClusterState,
    ResultEvent,
    ServiceGauges,
    StopUpdate,
    SyncDone,
    SyncFinished,
    SyncProgress,
    SyncStep,
    SyncUpdate,
    WatchAlert,
    WatchSample,
    WatchStarted,
    alert_line,
)

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.sweep_result import SweepResult
    from spark_tui.ops.bench import BenchConfig, BenchProgress, BenchResult
    from spark_tui.ops.compare import Comparison
    from spark_tui.ops.smoke import SmokeResult
    from spark_tui.service.evaluate import Evaluation

__all__ = [
    "AttachEvent",
    "BenchDone",
    "BenchEvent",
    "BenchLevel",
    "BenchProgressed",
    "ClusterEvent",
    "ClusterReady",
    "Compared",
    "ContainerStates",
    "DiscoverEvent",
    "Endpoint",
    "Evaluated",
    "LaunchEvent",
    "LinkSample",
    "LogEvent",
    "LogLine",
    "LogsEvent",
    "NodeMemory",
    "NodeNotAnswering",
    "NodeReachable",
    "NodeUnreachable",
    "Notice",
    "ProbeResult",
    "Probed",
    "Question",
    "RankContainer",
    "RankLogEnded",
    "RankLogRecord",
    "RankState",
    "RankStateChanged",
    "RayClusterState",
    "Recorded",
    "ResultEvent",
    "ServiceEvent",
    "ServiceGauges",
    "SmokeChecked",
    "SmokeDone",
    "SmokeEvent",
    "StopEvent",
    "StopUpdate",
    "Stopped",
    "SyncDone",
    "SyncEvent",
    "SyncFinished",
    "SyncProgress",
    "SyncStarted",
    "SyncStep",
    "SweepDone",
    "SweepEvent",
    "SweepProgressed",
    "SweepValueDone",
    "SyncUpdate",
    "TuneEvent",
    "TuneReplaced",
    "TuneRestored",
    "WatchAlert",
    "WatchEvent",
    "WatchSample",
    "WatchStarted",
    "alert_line",
]

# Question kinds.
HOST_KEY = "host_key"  # an unknown host key: trust it?
REPLACE_STALE = "replace_stale"  # containers of ours from an earlier run: remove them?
INSIST = "insist"  # the fit check refuses (or cannot check) the launch: launch anyway?
RESTORE = "restore"  # a tune's relaunch failed: relaunch the settings it replaced?


@dataclass(eq=False)
class Question:
    """Something only the user can decide. The consumer calls `reply(yes)`; a question
    left unanswered when the consumer asks for the next event takes `default`."""

    kind: str
    title: str
    text: str
    default: bool = False
    yes_label: str = "Yes"
    data: dict[str, Any] = field(default_factory=dict)
    answer: bool | None = None

    def reply(self, yes: bool) -> None:
        self.answer = bool(yes)

    @property
    def yes(self) -> bool:
        return self.default if self.answer is None else self.answer


@dataclass(frozen=True)
class Probed:
    """The nodes as probed: facts for each reachable node, the error of each other one."""

    nodes: list[NodeFacts]
    errors: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # name -> (msg, fix)


@dataclass(frozen=True)
class Evaluated:
    """A recipe evaluated on the nodes (see `service.evaluate`)."""

    evaluation: Evaluation


@dataclass(frozen=True)
class Endpoint:
    """Where the service's OpenAI API is: on the head, through our forward, and the
    command that opens the same tunnel from the user's machine."""

    cluster_id: str
    head: str
    api_url: str  # as seen on the head, e.g. http://127.0.0.1:8000/v1
    local_url: str | None  # our forward's local end, when we opened one
    tunnel: str  # ssh -N -L ... : works with the inventory's port, user and key
    # The tunnel's port on the user's machine: the API's own, unless another cluster of
    # ours beside this one has it (two tunnels cannot share a local port).
    tunnel_port: int | None = None


@dataclass(frozen=True)
class SmokeChecked:
    """One smoke check finished."""

    result: SmokeResult


@dataclass(frozen=True)
class SmokeDone:
    """Every smoke check finished; `run_id` is its history record (None if not recorded)."""

    base_url: str
    results: list[SmokeResult]
    run_id: str | None

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.ok for r in self.results)


@dataclass(frozen=True)
class BenchProgressed:
    """Where a running benchmark is."""

    progress: BenchProgress


@dataclass(frozen=True)
class BenchLevel:
    """One concurrency level finished (its figures, as in the history)."""

    level: dict[str, Any]


@dataclass(frozen=True)
class BenchDone:
    """The benchmark finished (or was cancelled: `result.cancelled`)."""

    result: BenchResult
    config: BenchConfig
    run_id: str | None


@dataclass(frozen=True)
class Recorded:
    """A run was written to the history (or could not be: `error`)."""

    kind: str
    run_id: str | None
    error: str | None = None


@dataclass(frozen=True)
class Compared:
    """A benchmark compared with its baseline, with the comparison's notes."""

    baseline_id: str
    run_id: str
    comparison: Comparison
    smoke_ok: bool | None = None
    notes: tuple[str, ...] = ()
    ranks_carrying: tuple[int, ...] = ()  # the ranks checked to run with the change


@dataclass(frozen=True)
class TuneReplaced:
    """A tune stopped the running cluster to relaunch it with `change` (after the change
    was checked); `overrides` are the settings it ran with, which bring it back."""

    cluster_id: str
    recipe: str
    overrides: dict[str, Any]
    change: str  # "KEY=VALUE"


@dataclass(frozen=True)
class TuneRestored:
    """The settings a tune replaced run again (cluster `cluster_id`), after the relaunch
    with `change` failed (`reason`) or was interrupted."""

    cluster_id: str
    change: str
    reason: str


@dataclass(frozen=True)
class SweepProgressed:
    """Where a sweep is: values done of the total, the value being measured and its phase
    (baseline, relaunch, check, smoke, bench, leave), the time left (None until a value
    has been measured)."""

    done: int
    total: int
    value: Any
    phase: str
    eta_s: float | None = None


@dataclass(frozen=True)
class SweepValueDone:
    """One value of a sweep has its row (measured, or why it did not start)."""

    result: SweepResult
    value: Any


@dataclass(frozen=True)
class SweepDone:
    """The sweep's table: every value's row and the best value that meets the targets."""

    result: SweepResult


@dataclass(frozen=True)
class Stopped:
    """What a stop removed; `left` is empty when nothing of ours is left."""

    cluster_id: str | None
    removed: list[tuple[str, str]]
    left: list[tuple[str, str]] = field(default_factory=list)
    killed: list[tuple[str, str]] = field(default_factory=list)  # ignored SIGTERM: SIGKILLed


@dataclass(frozen=True)
class SyncStarted:
    """A sync begins: `kind` is "models" or "image", `items` the model ids or the image
    reference, `nodes` the nodes in rank order (the head first)."""

    kind: str
    recipe: str
    items: tuple[str, ...]
    nodes: tuple[str, ...]


# -- what each action streams ------------------------------------------------------------
# Any action that opens the nodes may ask first whether to trust an unknown host key.

# `discover` and `probe`.
DiscoverEvent = Question | Probed

# `attach`: the endpoint, then the ranks followed as a launch follows them.
AttachEvent = Question | Endpoint | ClusterEvent

# `stop`: each rank removed, then what is left.
StopEvent = Question | Stopped | ClusterEvent

# `launch`: the nodes probed and the recipe evaluated (questions when the fit check
# refuses, when a cluster of ours or stale containers are in the way), a running cluster
# replaced, the endpoint, the ranks followed to ready, the launch recorded; an alert when
# a rank fails after ready.
LaunchEvent = (
    Question | Probed | Evaluated | Stopped | Endpoint | Recorded | WatchAlert | ClusterEvent
)

# `logs`: the ranks' lines (merged in time order, or as they come while following), the
# outages of a followed node and their ends, each container that ended.
LogsEvent = Question | LogEvent

# `watch`: its samples until the alert that ends it, then (unless the failed ranks are kept
# for inspection) the stop that removes them.
WatchEvent = WatchSample | StopEvent

# `smoke`: each check, the record, then every check's result.
SmokeEvent = Question | Notice | SmokeChecked | Recorded | SmokeDone

# `bench`: progress and levels, every node's link and memory samples (a node that does not
# answer one), the record, then the result.
BenchEvent = (
    Question
    | Notice
    | BenchProgressed
    | BenchLevel
    | LinkSample
    | NodeNotAnswering
    | Recorded
    | BenchDone
)

# `tune`: the baseline measured, a launch with the change that replaces the running cluster
# once the change is checked, the smoke checks and the benchmark, then the comparison; when
# the relaunch fails, the settings it replaced relaunched (asked).
TuneEvent = LaunchEvent | SmokeEvent | BenchEvent | Compared | TuneReplaced | TuneRestored

# `sweep`: the baseline (measured once), then per value what a tune step streams, its
# progress and its row; then the table, and what is left running.
SweepEvent = TuneEvent | SweepProgressed | SweepValueDone | SweepDone

# `sync_models` and `sync_image`: the nodes probed, the sync announced, then its updates.
SyncEvent = Question | Probed | SyncStarted | SyncUpdate

# Whatever an action streams (the cockpit renders every action with one consumer).
ServiceEvent = DiscoverEvent | SweepEvent | StopEvent | WatchEvent | SyncEvent | LogsEvent

"""Events that operations emit and both the cockpit and the headless CLI consume."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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


Event = RankStateChanged | LogLine | Notice | ClusterReady | ResultEvent

"""The service's events as Textual messages: the cockpit's workers post them, the App and
its widgets react. Log lines skip this: they go straight into their pane's bounded buffer,
which writes them to the screen in batches on a timer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from spark_tui.service import events as ev


class NodesProbed(Message):
    """The nodes were probed (facts, or each unreachable node's error)."""

    def __init__(self, probed: ev.Probed) -> None:
        super().__init__()
        self.probed = probed


class RankChanged(Message):
    """A rank moved to a new state."""

    def __init__(self, event: ev.RankStateChanged) -> None:
        super().__init__()
        self.event = event


class ClusterUp(Message):
    """Every rank is ready and the API answers."""

    def __init__(self, event: ev.ClusterReady) -> None:
        super().__init__()
        self.event = event


class EndpointKnown(Message):
    """Where the API is, and the tunnel command that reaches it."""

    def __init__(self, endpoint: ev.Endpoint) -> None:
        super().__init__()
        self.endpoint = endpoint


class ServiceNotice(Message):
    """Something to read: a step, a warning, an error with its remedy."""

    def __init__(self, notice: ev.Notice) -> None:
        super().__init__()
        self.notice = notice


class SmokeUpdate(Message):
    """A smoke check finished (`done` is set once they all have)."""

    def __init__(self, results: list[dict[str, object]], done: ev.SmokeDone | None) -> None:
        super().__init__()
        self.results = results
        self.done = done


class BenchUpdate(Message):
    """The benchmark moved on: a progress line, a finished level, or the end."""

    def __init__(
        self,
        progress: str | None = None,
        levels: list[dict[str, object]] | None = None,
        done: ev.BenchDone | None = None,
    ) -> None:
        super().__init__()
        self.progress = progress
        self.levels = levels
        self.done = done


class TuneCompared(Message):
    """The benchmark after a change, compared with the baseline."""

    def __init__(self, compared: ev.Compared) -> None:
        super().__init__()
        self.compared = compared


class ClusterStopped(Message):
    """A stop finished: nothing of ours is left (or `left` names what is)."""

    def __init__(self, stopped: ev.Stopped) -> None:
        super().__init__()
        self.stopped = stopped

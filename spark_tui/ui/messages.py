"""The service's events as Textual messages. The main screen's workers post each one to the
widgets that render it (and to the screen itself for its status line); none bubbles, so
who gets a message is said once, where it is sent. Log lines skip this: they go straight
into their pane's bounded buffer, which writes them to the screen in batches on a timer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from spark_tui.service import events as ev


class NodesProbed(Message, bubble=False):
    """The nodes were probed (facts, or each unreachable node's error)."""

    def __init__(self, probed: ev.Probed) -> None:
        super().__init__()
        self.probed = probed


class RankChanged(Message, bubble=False):
    """A rank moved to a new state (failed: with its reason and explaining lines)."""

    def __init__(self, event: ev.RankStateChanged) -> None:
        super().__init__()
        self.event = event


class ClusterUp(Message, bubble=False):
    """Every rank is ready and the API answers."""

    def __init__(self, event: ev.ClusterReady) -> None:
        super().__init__()
        self.event = event


class EndpointKnown(Message, bubble=False):
    """Where the API is, and the tunnel command that reaches it."""

    def __init__(self, endpoint: ev.Endpoint | None) -> None:
        super().__init__()
        self.endpoint = endpoint


class ServiceNotice(Message, bubble=False):
    """Something to read: a step, a warning, an error with its remedy."""

    def __init__(self, notice: ev.Notice) -> None:
        super().__init__()
        self.notice = notice


class SmokeUpdate(Message, bubble=False):
    """A smoke check finished (`done` is set once they all have)."""

    def __init__(self, results: list[dict[str, object]], done: ev.SmokeDone | None) -> None:
        super().__init__()
        self.results = results
        self.done = done


class BenchUpdate(Message, bubble=False):
    """The benchmark moved on: a progress line, or the end with every level."""

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


class TuneCompared(Message, bubble=False):
    """The benchmark after a change, compared with the baseline."""

    def __init__(self, compared: ev.Compared) -> None:
        super().__init__()
        self.compared = compared


class ClusterStopped(Message, bubble=False):
    """A stop finished: nothing of ours is left (or `left` names what is)."""

    def __init__(self, stopped: ev.Stopped) -> None:
        super().__init__()
        self.stopped = stopped


class NodeOutage(Message, bubble=False):
    """A node's link is down and is being re-opened: a state, never a failure."""

    def __init__(self, event: ev.NodeUnreachable) -> None:
        super().__init__()
        self.event = event


class NodeBack(Message, bubble=False):
    """A node answers again after an outage."""

    def __init__(self, event: ev.NodeReachable) -> None:
        super().__init__()
        self.event = event


class WatchSampled(Message, bubble=False):
    """One sample of the watch after ready: its start, the tiny request, the /metrics
    gauges, a node's memory, the containers, or a node that did not answer this round."""

    def __init__(self, event: ev.WatchSample) -> None:
        super().__init__()
        self.event = event


class LinkSampled(Message, bubble=False):
    """One node's memory and rank interfaces, sampled while a benchmark or the watch runs."""

    def __init__(self, sample: ev.LinkSample) -> None:
        super().__init__()
        self.sample = sample


class WatchEnded(Message, bubble=False):
    """The watch stopped (the cluster was stopped, relaunched or failed); `why` says so."""

    def __init__(self, why: str) -> None:
        super().__init__()
        self.why = why


class RankAlert(Message, bubble=False):
    """A rank of the watched cluster failed: which, why, its lines and, after a worker's
    death, the head's. `remedy` says what to do now."""

    def __init__(self, alert: ev.WatchAlert, remedy: str) -> None:
        super().__init__()
        self.alert = alert
        self.remedy = remedy

"""The gauges panel: what the watch after ready sees (requests running and waiting, KV cache
use, tokens/s, the last tiny request's latency, every node's memory), and its alert."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.ui import messages as msg

# Below this width the panel says everything on one line.
WIDE = 110


class WatchView:
    """The latest of each sample, as the panel shows them."""

    def __init__(self) -> None:
        self.started: ev.WatchStarted | None = None
        self.gauges: ev.ServiceGauges | None = None
        self.probe: ev.ProbeResult | None = None
        self.memory: dict[str, ev.NodeMemory] = {}
        self.silent: dict[str, ev.NodeNotAnswering] = {}
        self.alert: ev.WatchAlert | None = None
        self.remedy = ""
        self.ended: str | None = None

    def take(self, event: ev.WatchSample) -> None:
        if isinstance(event, ev.WatchStarted):
            self.started = event
        elif isinstance(event, ev.ServiceGauges):
            self.gauges = event
        elif isinstance(event, ev.ProbeResult):
            self.probe = event
        elif isinstance(event, ev.NodeMemory):
            self.memory[event.node] = event
            self.silent.pop(event.node, None)
        elif isinstance(event, ev.NodeNotAnswering):
            self.silent[event.node] = event


class GaugesPanel(Static):
    """Hidden until the watch after ready starts; then its gauges, refreshed as samples
    arrive, and the alert when a rank fails."""

    DEFAULT_CSS = """
    GaugesPanel { height: auto; max-height: 14; padding: 0 1; display: none;
                  border-top: solid $panel-lighten-2; }
    GaugesPanel.-watching { display: block; }
    GaugesPanel.-alert { border-top: solid $error; }
    GaugesPanel.-one-row-each { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.view = WatchView()

    @property
    def wide(self) -> bool:
        return (self.size.width or self.app.size.width) >= WIDE

    def render_body(self) -> Text:
        view = self.view
        wide = self.wide
        nodes = list(view.started.nodes) if view.started else sorted(view.memory)
        # The lines' module is loaded when the panel first shows (the first frame has none).
        from spark_tui.ui.widgets import gauge_lines as make

        lines = [make.gauges_line(view, wide)]
        if wide or not view.alert:
            width = self.content_region.width or self.app.size.width - 2
            lines.append(make.memory_line(view, nodes, wide, width))
        if view.ended and not view.alert:
            lines.append(Text(f"not watching: {view.ended}", style="dim"))
        if view.alert is not None:
            lines.append(make.alert_text(view.alert, view.remedy, wide))
        return Text("\n").join(lines)

    def _redraw(self) -> None:
        shown = self.view.started is not None or self.view.alert is not None
        self.set_class(shown, "-watching")
        self.set_class(self.view.alert is not None, "-alert")
        self.set_class(not self.wide, "-one-row-each")
        # Hidden until a watch starts or a rank fails: nothing to write until then.
        self.update(self.render_body() if shown else "")

    def on_resize(self) -> None:
        self._redraw()

    def clear(self) -> None:
        """A new cluster: nothing watched yet."""
        self.view = WatchView()
        self._redraw()

    def on_watch_sampled(self, message: msg.WatchSampled) -> None:
        if isinstance(message.event, ev.WatchStarted):
            self.view = WatchView()  # a new watch starts from nothing
        self.view.take(message.event)
        self.view.ended = None
        self._redraw()

    def on_nodes_probed(self, message: msg.NodesProbed) -> None:
        """A probe's reading of the watched nodes' memory is newer than the last sample."""
        if self.view.started is None:
            return
        watched = set(self.view.started.nodes)
        for node in message.probed.nodes:
            if node.name in watched and node.memory_available_bytes is not None:
                self.view.take(
                    ev.NodeMemory(node.name, node.memory_total_bytes, node.memory_available_bytes)
                )
        self._redraw()

    def on_rank_alert(self, message: msg.RankAlert) -> None:
        shown, new = self.view.alert, message.alert
        if shown is None:
            self.view.alert, self.view.remedy = new, message.remedy
        elif new.rank == shown.rank:
            # The same failure told again (the watch, then the launch that removed the
            # ranks): the first says what went first, the later one what is left now.
            self.view.alert = dataclasses.replace(
                shown,
                lines=shown.lines or new.lines,
                head_lines=shown.head_lines or new.head_lines,
                others=shown.others or new.others,
            )
            self.view.remedy = message.remedy
        self._redraw()

    def on_watch_ended(self, message: msg.WatchEnded) -> None:
        self.view.ended = message.why
        self._redraw()

    def on_cluster_stopped(self, message: msg.ClusterStopped) -> None:
        if message.stopped.cluster_id is not None:
            self.clear()

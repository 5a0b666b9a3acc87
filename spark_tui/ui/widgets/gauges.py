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

GIB = 1024**3
# Below this width the panel says everything on one line.
WIDE = 110
# Lines of the failed rank (and of the head) the alert shows; the pane keeps them all.
ALERT_LINES = 4


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "–" if value is None else fmt.format(value)


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.0f}"


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


def gauges_line(view: WatchView, wide: bool = True) -> Text:
    """`watch  running 1 · waiting 0 · KV cache 12% · 38 tok/s · probe 15 ms`."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("watch " if wide else "", style="bold")
    g = view.gauges
    kv = None if g is None or g.kv_cache_usage is None else g.kv_cache_usage * 100
    parts = [
        ("running", _num(g.running if g else None)),
        ("waiting", _num(g.waiting if g else None)),
        ("KV cache" if wide else "KV", _num(kv, "{:.1f}") + "%"),
    ]
    for i, (label, value) in enumerate(parts):
        text.append(" · " if i else (" " if wide else ""), style="dim")
        text.append(f"{label} ", style="dim")
        text.append(value, style="bold")
    text.append(" · ", style="dim")
    text.append(_num(g.generation_tokens_per_s if g else None, "{:.1f}"), style="bold")
    text.append(" tok/s", style="dim")
    probe = view.probe
    text.append(" · probe ", style="dim")
    if probe is None:
        text.append("–", style="bold")
    elif probe.ok:
        text.append(f"{probe.latency_s * 1000:.0f} ms", style="bold green")
    else:
        what = probe.error if probe.status is None else f"{probe.status}: {probe.error}"
        text.append(f"✗ {what}", style="bold red")
    return text


def memory_line(
    view: WatchView, nodes: list[str], wide: bool = True, width: int | None = None
) -> Text:
    """`memory  spark-a 98/128 GiB free · spark-b not answering since 12 s, retrying`.
    Within `width`: wide, the nodes go on as many rows as they need (under the label);
    narrow, one row, the separators shortened so that every node's figure still fits."""
    label = "memory" if wide else "mem"
    entries = [_node_memory(view, node, wide) for node in nodes]
    sep = " · "
    if width is not None and not wide:
        needed = len(label) + sum(len(e) for e in entries) + len(sep) * len(entries)
        if needed > width:
            sep = " "
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(label, style="bold")
    column = len(label)
    for i, entry in enumerate(entries):
        gap = sep if i else " "
        if wide and width is not None and i and column + len(gap) + len(entry) > width:
            text.append("\n" + " " * len(label))
            column, gap = len(label), " "
        text.append(gap, style="dim")
        text.append_text(entry)
        column += len(gap) + len(entry)
    return text


def _node_memory(view: WatchView, node: str, wide: bool) -> Text:
    silent = view.silent.get(node)
    if silent is not None:
        return Text(f"{node} not answering since {silent.since_s:.0f} s, retrying", "yellow")
    mem = view.memory.get(node)
    if mem is None:
        return Text(f"{node} –", style="dim")
    figure = f"{_gib(mem.available)}/{_gib(mem.total)}"
    if not wide:
        return Text(f"{figure}G", style="bold")
    text = Text(f"{node} ")
    text.append(f"{figure} GiB free", style="bold")
    return text


def alert_text(alert: ev.WatchAlert, remedy: str, wide: bool = True) -> Text:
    """The failed rank, why, its last lines, the head's after a worker's death, the remedy
    (narrow: fewer lines, one row each; the status line says the remedy)."""
    keep = ALERT_LINES if wide else 1
    text = Text(no_wrap=not wide, overflow="ellipsis")
    text.append(f"rank {alert.rank} on {alert.node} failed: {alert.reason}", style="bold red")
    for line in alert.lines[-keep:]:
        text.append(f"\n  | {ev.alert_line(line)}", style="red")
    if alert.head_lines:
        text.append("\nthe head says:", style="bold")
        for line in alert.head_lines[-max(keep, 2) :]:
            text.append(f"\n  | {ev.alert_line(line)}", style="red")
    for other in alert.others if wide else ():
        text.append(f"\nthen {other}", style="dim")
    if remedy and wide:
        text.append(f"\n→ {remedy}")
    return text


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
        lines = [gauges_line(view, wide)]
        if wide or not view.alert:
            width = self.content_region.width or self.app.size.width - 2
            lines.append(memory_line(view, nodes, wide, width))
        if view.ended and not view.alert:
            lines.append(Text(f"not watching: {view.ended}", style="dim"))
        if view.alert is not None:
            lines.append(alert_text(view.alert, view.remedy, wide))
        return Text("\n").join(lines)

    def _redraw(self) -> None:
        self.set_class(self.view.started is not None or self.view.alert is not None, "-watching")
        self.set_class(self.view.alert is not None, "-alert")
        self.set_class(not self.wide, "-one-row-each")
        self.update(self.render_body())

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

"""The gauges panel's lines (spark_tui.ui.widgets.gauges): the service's gauges, every
node's memory, the alert of a failed rank. Loaded when the panel first shows (the first
frame has nothing watched)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.ui.widgets.gauges import WatchView

GIB = 1024**3
# Lines of the failed rank (and of the head) the alert shows; the pane keeps them all.
ALERT_LINES = 4


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "–" if value is None else fmt.format(value)


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.0f}"


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

"""The link panel: every node's rank interfaces (GB/s each way and share of the link's
speed) and its free memory, as sampled while a benchmark or the watch runs, and the last
benchmark's peaks. Hidden until the first sample."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.core.link import LinkFigure, MemoryFigure
    from spark_tui.ui import messages as msg

GIB = 1024**3
# Below this width the panel says every node on one line.
WIDE = 110


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.0f}"


def sample_text(sample: ev.LinkSample, wide: bool) -> Text:
    """`spark-a enp1s0f1np1 ↓1.73 ↑1.70 GB/s 7% of 25 GB/s · 98/128 GiB free`."""
    # Loaded on the first sample, not with the cockpit's first frame.
    from spark_tui.core.link import GB, fmt_gbs, fmt_share

    text = Text()
    text.append(sample.node)
    for r in sample.interfaces:
        if wide:
            text.append(f" {r.interface}", style="dim")
        text.append(f" ↓{fmt_gbs(r.rx_bytes_per_s)} ↑{fmt_gbs(r.tx_bytes_per_s)}", style="bold")
        text.append(" GB/s " if wide else " ", style="dim")
        text.append(fmt_share(r.share), style="bold")
        if wide and r.speed_bytes_per_s:
            text.append(f" of {r.speed_bytes_per_s / GB:g} GB/s", style="dim")
    for name in sample.missing:
        text.append(f" {name} not on the node", style="yellow")
    if not sample.interfaces and not sample.missing:
        text.append(" no rank interface", style="dim")
    if wide:
        text.append(" · ", style="dim")
        text.append(f"{_gib(sample.mem_available)}/{_gib(sample.mem_total)} GiB free")
    return text


def figure_text(fig: LinkFigure, memory: MemoryFigure | None, wide: bool) -> Text:
    """`spark-a enp1s0f1np1 peak ↓1.73 ↑1.70 GB/s 7% · least free 98/128 GiB`."""
    # Loaded on the first sample, not with the cockpit's first frame.
    from spark_tui.core.link import GB, fmt_gbs, fmt_share

    text = Text()
    text.append(fig.node)
    if wide:
        text.append(f" {fig.interface}", style="dim")
    text.append(" peak " if wide else " ", style="dim")
    rx = None if fig.rx_peak_gbs is None else fig.rx_peak_gbs * GB
    tx = None if fig.tx_peak_gbs is None else fig.tx_peak_gbs * GB
    text.append(f"↓{fmt_gbs(rx)} ↑{fmt_gbs(tx)}", style="bold")
    text.append(" GB/s " if wide else " ", style="dim")
    text.append(fmt_share(fig.peak_share), style="bold")
    if wide and memory is not None:
        text.append(" · least free ", style="dim")
        text.append(f"{_gib(memory.min_available)}/{_gib(memory.total)} GiB")
    return text


def _busiest_first(sample: ev.LinkSample) -> float:
    shares = [r.share for r in sample.interfaces if r.share is not None]
    return -max(shares, default=0.0)


def one_row(parts: list[Text], width: int) -> Text:
    """`link a ↓… · b ↓… +2 more`: as many nodes as the row holds, the busiest first
    (the caller's order), and how many did not fit, so 4 or 8 nodes stay readable at 80
    columns instead of being cut mid-node."""
    row = Text("link ", style="bold")
    for i, part in enumerate(parts):
        left = len(parts) - i - 1
        more = f" +{left} more" if left else ""
        sep = Text(" · ", style="dim") if i else Text()
        if row.cell_len + sep.cell_len + part.cell_len + len(more) > width and i:
            row.append(f" +{len(parts) - i} more", style="dim")
            return row
        row += sep + part
    return row


class LinkPanel(Static):
    """See module doc."""

    DEFAULT_CSS = """
    LinkPanel { height: auto; max-height: 9; padding: 0 1; display: none; }
    LinkPanel.-shown { display: block; }
    LinkPanel.-one-row { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.samples: dict[str, ev.LinkSample] = {}
        self.bench: ev.BenchDone | None = None

    @property
    def wide(self) -> bool:
        return (self.size.width or self.app.size.width) >= WIDE

    def render_body(self) -> Text:
        """Wide: a row per node sampled now, then a row per interface of the last benchmark
        (its peaks). Narrow: one row, the live samples, else the benchmark's peaks."""
        wide = self.wide
        live = [sample_text(s, wide) for s in self.samples.values()]
        peaks: list[Text] = []
        if self.bench is not None:
            memory = {m.node: m for m in self.bench.result.memory}
            peaks = [figure_text(f, memory.get(f.node), wide) for f in self.bench.result.link]
        if not wide:
            if live:
                ranked = sorted(self.samples.values(), key=_busiest_first)
                return one_row([sample_text(s, wide) for s in ranked], self._room())
            if self.bench is not None:
                figures = sorted(self.bench.result.link, key=lambda f: -(f.peak_share or 0.0))
                memory = {m.node: m for m in self.bench.result.memory}
                rows = [figure_text(f, memory.get(f.node), wide) for f in figures]
                return one_row(rows, self._room())
            return one_row([], self._room())
        rows = [Text("link", style="bold"), *(Text("  ") + r for r in live)]
        if peaks:
            if live:
                rows.append(Text("last benchmark", style="dim"))
            else:
                rows[0].append(" (last benchmark)", style="dim")
            rows += [Text("  ") + r for r in peaks]
        return Text("\n").join(rows)

    def _room(self) -> int:
        # The panel's own width less its padding; the app's before the first layout.
        return max(20, (self.size.width or self.app.size.width) - 2)

    def _redraw(self) -> None:
        shown = bool(self.samples) or bool(self.bench and self.bench.result.link)
        self.set_class(shown, "-shown")
        self.set_class(not self.wide, "-one-row")
        self.update(self.render_body())

    def on_resize(self) -> None:
        self._redraw()

    def on_link_sampled(self, message: msg.LinkSampled) -> None:
        self.samples[message.sample.node] = message.sample
        self._redraw()

    def on_bench_update(self, message: msg.BenchUpdate) -> None:
        """The benchmark's summary replaces its live samples."""
        if message.done is not None:
            self.bench = message.done
            self.samples.clear()
            self._redraw()

    def on_cluster_stopped(self, message: msg.ClusterStopped) -> None:
        if message.stopped.cluster_id is not None:
            self.clear()

    def clear(self) -> None:
        """A new cluster, or none: nothing sampled yet."""
        self.samples.clear()
        self.bench = None
        self._redraw()

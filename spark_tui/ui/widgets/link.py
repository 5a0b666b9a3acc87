"""The link panel: every node's rank interfaces (GB/s each way and share of the link's
speed) and its free memory, as sampled while a benchmark or the watch runs, and the last
benchmark's peaks. Hidden until the first sample."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.ui import messages as msg

# Below this width the panel says every node on one line.
WIDE = 110


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
        # The rows' module is loaded with the first sample (the first frame has none).
        from spark_tui.ui.widgets import link_lines as lines

        live = [lines.sample_text(s, wide) for s in self.samples.values()]
        peaks: list[Text] = []
        if self.bench is not None:
            memory = {m.node: m for m in self.bench.result.memory}
            peaks = [lines.figure_text(f, memory.get(f.node), wide) for f in self.bench.result.link]
        if not wide:
            if live:
                ranked = sorted(self.samples.values(), key=lines.busiest_first)
                return lines.one_row([lines.sample_text(s, wide) for s in ranked], self._room())
            if self.bench is not None:
                figures = sorted(self.bench.result.link, key=lambda f: -(f.peak_share or 0.0))
                memory = {m.node: m for m in self.bench.result.memory}
                rows = [lines.figure_text(f, memory.get(f.node), wide) for f in figures]
                return lines.one_row(rows, self._room())
            return lines.one_row([], self._room())
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
        # Hidden until the first sample or benchmark: nothing to write until then.
        self.update(self.render_body() if shown else "")

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

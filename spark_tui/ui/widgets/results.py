"""The results bar: status, smoke checks, benchmark sweep (with a small chart), comparison."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

if TYPE_CHECKING:
    from spark_tui.ui import messages as msg

# Below this width the bar says each thing on one line.
WIDE = 110


def _lines() -> ModuleType:
    """The module that makes the result lines (not needed until there is a result)."""
    from spark_tui.ui.widgets import result_lines

    return result_lines


class ResultsBar(VerticalScroll, can_focus=True):
    """Status, then the endpoint, smoke, benchmark and comparison lines under the logs
    (scrolls when long); the results come as messages, the status from the screen."""

    DEFAULT_CSS = """
    ResultsBar { height: auto; min-height: 1; max-height: 12; padding: 0 1;
                 border-top: solid $panel-lighten-2; scrollbar-size-vertical: 1; }
    ResultsBar:focus { border-top: solid $primary; }
    ResultsBar > Static { height: auto; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.status = Text("no cluster running: pick a recipe and press l", style="dim")
        self.smoke: list[dict[str, Any]] | None = None
        self.levels: list[dict[str, Any]] | None = None
        self.compare: Text | None = None
        self.endpoint: Any = None  # service.events.Endpoint

    def compose(self) -> ComposeResult:
        yield Static(self.status, id="results-body")

    @property
    def wide(self) -> bool:
        return (self.size.width or self.app.size.width) >= WIDE

    def render_body(self) -> RenderableType:
        """What the bar shows: one line each when narrow; chart and comparison side by side
        when wide."""
        wide = self.wide
        lines: list[Text] = [self.status.copy()]
        key_of = getattr(self.app, "key_of", None)
        copy_key = key_of("copy_tunnel", "y") if key_of is not None else "y"
        chart = _lines().sweep_chart(self.levels, wide) if self.levels else None
        if not wide:
            # The newest results first, the endpoint last in one line: on a small terminal
            # the figures are what the user pressed the key for (the rest scrolls).
            figures = self.compare.copy() if self.compare is not None else chart
            if figures is None:
                if self.endpoint is not None:
                    lines += _lines().endpoint_lines(self.endpoint, copy_key)
                if self.smoke:
                    lines.append(_lines().smoke_line(self.smoke, wide))
            else:
                lines.append(figures)
                if self.smoke:
                    lines.append(_lines().smoke_line(self.smoke, wide))
                if self.endpoint is not None:
                    lines.append(_lines().endpoint_line(self.endpoint, copy_key))
            for line in lines:
                line.no_wrap, line.overflow = True, "ellipsis"
            # A Group of Texts, as rich renders them: each line is cut, never wrapped.
            return Group(*lines)
        if self.endpoint is not None:
            lines += _lines().endpoint_lines(self.endpoint, copy_key)
        if self.smoke:
            lines.append(_lines().smoke_line(self.smoke, wide))
        # Each line keeps its own wrapping: the endpoint's never wrap, a failure's remedy may.
        if chart is None and self.compare is None:
            return Group(*lines)
        grid = Table.grid(padding=(0, 3))
        grid.add_column(no_wrap=True)
        grid.add_column()
        grid.add_row(chart or Text(), self.compare or Text())
        return Group(*lines, grid)

    def _redraw(self) -> None:
        bodies = self.query("#results-body") if self.is_mounted else None
        if bodies:  # (not while the screen is being torn down)
            body = bodies.first(Static)
            body.update(self.render_body())
            # A new height asked for while another screen is on top (the sync view) can be
            # left pending on Python 3.12+: ask again once this refresh is done.
            self.call_after_refresh(body.refresh, layout=True)

    def on_mount(self) -> None:
        self._redraw()

    def on_resize(self) -> None:
        self._redraw()

    def set_status(self, text: Text | str) -> None:
        self.status = text if isinstance(text, Text) else Text(text)
        self._redraw()

    def set_smoke(self, results: list[dict[str, Any]] | None) -> None:
        self.smoke = results or None
        self._redraw()

    def set_bench(self, levels: list[dict[str, Any]] | None) -> None:
        self.levels = levels or None
        self._redraw()

    def set_compare(self, text: Text | None) -> None:
        self.compare = text
        self._redraw()

    def set_endpoint(self, endpoint: Any) -> None:
        """The API's URL and the tunnel command (None: no cluster)."""
        self.endpoint = endpoint
        self._redraw()

    def clear_results(self) -> None:
        self.smoke, self.levels, self.compare = None, None, None
        self._redraw()

    # ------------------------------------------------------------ messages
    def on_endpoint_known(self, message: msg.EndpointKnown) -> None:
        self.set_endpoint(message.endpoint)

    def on_smoke_update(self, message: msg.SmokeUpdate) -> None:
        self.set_smoke(message.results)

    def on_bench_update(self, message: msg.BenchUpdate) -> None:
        if message.done is not None:
            self.set_bench(message.levels)

    def on_tune_compared(self, message: msg.TuneCompared) -> None:
        from spark_tui.ui.views import comparison_text

        self.set_compare(comparison_text(message.compared))

    def on_cluster_stopped(self, message: msg.ClusterStopped) -> None:
        if message.stopped.cluster_id is not None:  # ours (not one a launch replaced)
            self.set_endpoint(None)

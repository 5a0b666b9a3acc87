"""The results bar: status, smoke checks, benchmark sweep (with a small chart), comparison."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from spark_tui.core.wording import depth_label

if TYPE_CHECKING:
    from spark_tui.ui import messages as msg

BLOCKS = " ▏▎▍▌▋▊▉█"
SHORT_NAMES = {"tool_call": "tools", "streaming": "stream"}
# Below this width the bar says each thing on one line.
WIDE = 110


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def smoke_line(results: list[dict[str, Any]], wide: bool = True) -> Text:
    """`smoke ✓ health 4 ms ✓ chat 1.2 s ...`; a failure in red with its cause and remedy."""
    ok_all = all(r.get("ok") for r in results)
    text = Text(no_wrap=not wide, overflow="ellipsis")
    text.append("smoke ", style="bold green" if ok_all else "bold red")
    for res in results:
        ok = bool(res.get("ok"))
        name = res["name"] if wide else SHORT_NAMES.get(res["name"], res["name"])
        text.append(
            ("✓ " if ok else "✗ ") if wide else ("✓" if ok else "✗"),
            style="green" if ok else "bold red",
        )
        text.append(name, style="" if ok else "bold red")
        latency = _duration(res.get("latency_s"))
        if latency:
            text.append(" " + (latency if wide else latency.replace(" ", "")), style="dim")
        if wide and ok and res["name"] == "tool_call":
            data = res.get("data") or {}
            if data.get("function"):
                args = str(data.get("arguments") or "")
                args = args if len(args) <= 30 else args[:29] + "…"
                text.append(f" {data['function']}({args})", style="dim")
        text.append("  " if wide else " ")
    text.rstrip()
    failed = [r for r in results if not r.get("ok")]
    if failed:
        first = failed[0]
        cause = first.get("cause") or first.get("detail") or "failed"
        text.append(f"\n{first['name']}: {cause}", style="red")
        if first.get("remedy"):
            text.append(f"  → {first['remedy']}", style="dim")
    return text


def endpoint_line(endpoint: Any, copy_key: str = "y") -> Text:
    """`API http://10.0.0.1:8000/v1  y copies the tunnel command`: the endpoint in one line,
    for a small terminal where the results need the room."""
    api = Text(no_wrap=True, overflow="ellipsis")
    api.append("API ", style="bold")
    api.append(endpoint.api_url)
    api.append(f"  {copy_key} copies the tunnel command", style="dim")
    return api


def endpoint_lines(endpoint: Any, copy_key: str = "y") -> list[Text]:
    """`API http://10.0.0.1:8000/v1` and `tunnel ssh -N -L ...`, one line each and never
    wrapped (a mouse copy of a wrapped command breaks it): a line too long for the terminal
    ends in an ellipsis, and `copy_key` copies the whole command."""
    api = Text(no_wrap=True, overflow="ellipsis")
    api.append("API ", style="bold")
    api.append(endpoint.api_url)
    api.append(f"  from your machine: tunnel below, {copy_key} copies it", style="dim")
    tunnel = Text(no_wrap=True, overflow="ellipsis")
    tunnel.append("tunnel ", style="bold")
    tunnel.append(endpoint.tunnel)
    return [api, tunnel]


def _figure(level: dict[str, Any], name: str) -> float | None:
    value = (level.get("figures") or {}).get(name)
    return None if value is None else float(value)


def level_label(level: dict[str, Any]) -> str:
    """`c8`, or `c8@4k` at a context depth."""
    depth = int(level.get("context_depth") or 0)
    return f"c{level['concurrency']}" + (f"@{depth_label(depth)}" if depth else "")


def sweep_chart(levels: list[dict[str, Any]], wide: bool = True, width: int = 24) -> Text:
    """Total output tokens/s per level, one bar each, with its TTFT and ITL (narrow: a
    shorter bar, so a level's figures fit in 80 columns)."""
    peak = max((_figure(lv, "total_output_tps") or 0.0 for lv in levels), default=0.0) or 1.0
    text = Text(no_wrap=not wide, overflow="ellipsis")
    width = width if wide else 8
    label_width = max(4, *(len(level_label(lv)) + 1 for lv in levels))
    for i, lv in enumerate(levels):
        if i:
            text.append("\n")
        tps = _figure(lv, "total_output_tps") or 0.0
        text.append("bench " if i == 0 else "      ", style="bold")
        text.append(f"{level_label(lv):<{label_width}}", style="dim")
        eighths = int(round(tps / peak * width * 8))
        full, part = divmod(eighths, 8)
        bar = "█" * full + (BLOCKS[part] if part else "")
        text.append(f"{bar:<{width}}", style="green")
        text.append(f" {tps:6.0f} tok/s")
        ttft, itl = _figure(lv, "ttft_p50_s"), _figure(lv, "itl_mean_s")
        if ttft is not None:
            text.append(f"  TTFT p50 {_duration(ttft)}")
        if itl is not None:
            text.append(f"  ITL {itl * 1000:.1f} ms")
        goodput = _figure(lv, "goodput_rps")
        if goodput is not None:
            text.append(f"  goodput {goodput:.2f}/s", style="dim")
        errors = lv.get("errors") or 0
        if errors:
            text.append(f"  {errors} errors", style="bold red")
    return text


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
        chart = sweep_chart(self.levels, wide) if self.levels else None
        if not wide:
            # The newest results first, the endpoint last in one line: on a small terminal
            # the figures are what the user pressed the key for (the rest scrolls).
            figures = self.compare.copy() if self.compare is not None else chart
            if figures is None:
                if self.endpoint is not None:
                    lines += endpoint_lines(self.endpoint, copy_key)
                if self.smoke:
                    lines.append(smoke_line(self.smoke, wide))
            else:
                lines.append(figures)
                if self.smoke:
                    lines.append(smoke_line(self.smoke, wide))
                if self.endpoint is not None:
                    lines.append(endpoint_line(self.endpoint, copy_key))
            for line in lines:
                line.no_wrap, line.overflow = True, "ellipsis"
            # A Group of Texts, as rich renders them: each line is cut, never wrapped.
            return Group(*lines)
        if self.endpoint is not None:
            lines += endpoint_lines(self.endpoint, copy_key)
        if self.smoke:
            lines.append(smoke_line(self.smoke, wide))
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

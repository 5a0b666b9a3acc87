"""One rank's log: bounded buffers, writes batched on a timer, follow-the-tail, `/` filter."""

from __future__ import annotations

import re
from collections import deque
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import Vertical
from textual.reactive import reactive
from textual.strip import Strip
from textual.widgets import Log, Static

from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.ui import messages as msg

# The pane keeps this many lines for the `/` filter; older ones are dropped.
KEEP_LINES = 10_000
# The log widget itself holds this many lines of scroll-back (the filter re-reads KEEP_LINES).
SHOWN_LINES = 5_000
# Lines arriving faster than the screen can take wait here; beyond it the oldest are dropped
# (and counted) rather than letting memory grow without bound.
PENDING_LIMIT = 10_000
FLUSH_SECONDS = 0.1

# vLLM's prefixes: "(APIServer pid=74) INFO 09-09 15:19:36 [file.py:12] message", uvicorn's
# "INFO:     127.0.0.1 ...". The compact view drops them (the filter still sees them).
_PROC_PREFIX = re.compile(r"^\((?:[\w.-]+ pid=\d+(?:, ip=[\d.]+)?)\)\s?")
_VLLM_PREFIX = re.compile(
    r"^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d [\d:.]+ \[?[\w./-]+\.py:\d+\]\s?"
)
_UVICORN_PREFIX = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")


def compact_line(line: str) -> str:
    """The line without vLLM's process, time and source prefixes; WARNING/ERROR kept."""
    m = _PROC_PREFIX.match(line)
    if m:
        line = line[m.end() :]
    m = _VLLM_PREFIX.match(line) or _UVICORN_PREFIX.match(line)
    if m is None:
        return line
    level = m.group(1)
    rest = line[m.end() :]
    return rest if level in ("INFO", "DEBUG") else f"{level} {rest}"


def _rich(colour: str | None, fallback: str) -> Style:
    try:
        return Style(color=Color.parse(colour or fallback).rich_color)
    except Exception:  # an unparseable theme colour: fall back, never fail a render
        return Style(color=Color.parse(fallback).rich_color)


class KindHighlighter(Highlighter):
    """Colours a line by the kind core.logclass gave it (errors, warnings, readiness,
    progress), in the theme's colours; the pane sets `kind` before each line renders."""

    def __init__(self) -> None:
        self.kind = "info"
        self.set_colours(None, None, None, None)

    def set_colours(
        self, error: str | None, warning: str | None, success: str | None, accent: str | None
    ) -> None:
        self.styles = {
            "error": _rich(error, "red") + Style(bold=True),
            "warning": _rich(warning, "yellow"),
            "ready": _rich(success, "green") + Style(bold=True),
            "progress": _rich(accent, "cyan"),
        }

    def highlight(self, text: Text) -> None:
        style = self.styles.get(self.kind)
        if style is not None:
            text.stylize(style)


class RankLog(Log):
    """A `Log` that highlights at render time only (ingest stays cheap) and keeps following
    the tail (also across resizes) until the user scrolls up."""

    DEFAULT_CSS = """
    RankLog { height: 1fr; border: none; padding: 0 0; scrollbar-size-vertical: 1;
              scrollbar-size-horizontal: 0; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(highlight=True, max_lines=SHOWN_LINES, **kwargs)  # type: ignore[arg-type]
        self.highlighter: KindHighlighter = KindHighlighter()
        self.follow = True
        self._kinds: list[str] = []  # one per line of the log, as classified

    def on_mount(self) -> None:
        self._theme_colours()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._theme_colours())

    def _theme_colours(self) -> None:
        theme = self.app.current_theme
        self.highlighter.set_colours(theme.error, theme.warning, theme.success, theme.accent)
        self._render_line_cache.clear()
        self.refresh()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # Scrolled to the end (by us or by the user): follow; scrolled up: stay put.
        self.follow = new_value >= self.max_scroll_y

    def on_resize(self) -> None:
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def add_lines(self, lines: list[tuple[str, str]]) -> None:
        """Write (line, kind) pairs; the kind colours the line."""
        self._kinds.extend(kind for _line, kind in lines)
        self.write_lines([line for line, _kind in lines], scroll_end=self.follow)
        extra = len(self._kinds) - len(self.lines)
        if extra > 0:  # the log dropped its oldest lines: so do the kinds
            del self._kinds[:extra]

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        # Textual's Log measures each write's lines in a thread worker of its own. In a burst
        # those workers queue (a few threads, each waiting for the event loop to take its
        # result), each holding its write's lines: tens of batches stayed alive together, and
        # the heap they grew stayed with the process (+85 MB after 1,000,000 lines). Measured
        # here, inline (so no worker is returned): a printable ASCII line is as wide as it is long.
        if lines:
            width = max(
                len(line)
                if line.isascii() and line.isprintable()
                else cell_len(self._process_line(line))
                for line in lines
            )
            self._update_maximum_width(updates, width)

    def clear(self) -> RankLog:
        self._kinds.clear()
        super().clear()
        return self

    def _render_line_strip(self, y: int, rich_style: Style) -> Strip:
        # The one hook that knows which line renders: give the highlighter its kind.
        self.highlighter.kind = self._kinds[y] if y < len(self._kinds) else "info"
        return super()._render_line_strip(y, rich_style)


class LogPane(Vertical):
    """Header (rank, node, state, progress), the failure's explaining lines, and the log."""

    ALLOW_MAXIMIZE = True
    DEFAULT_CSS = """
    LogPane { border: round $panel-lighten-2; height: 1fr; min-height: 4; }
    LogPane:focus-within { border: round $primary; }
    LogPane > .pane-head { height: 1; padding: 0 1; background: $panel; }
    LogPane > .pane-why { height: auto; max-height: 8; padding: 0 1; color: $error;
                          display: none; border-bottom: solid $error 50%; }
    LogPane.failed > .pane-why { display: block; }
    """

    state: reactive[str] = reactive("idle")
    progress: reactive[float | None] = reactive(None)
    filter_text: reactive[str] = reactive("")
    compact: reactive[bool] = reactive(True)

    def __init__(
        self, rank: int, node: str, *, role: str | None = None, id: str | None = None
    ) -> None:
        super().__init__(id=id or f"rank-{rank}")
        self.rank = rank
        self.node = node
        self.role = role
        self._all: deque[tuple[str, str]] = deque(maxlen=KEEP_LINES)
        self._pending: deque[tuple[str, str]] = deque(maxlen=PENDING_LIMIT)
        self.received = 0
        self.dropped = 0
        # Our own API requests (health checks, the benchmark's /metrics polling) in the
        # head's access log: counted, not shown.
        self.own_requests = 0
        self.reason: str | None = None
        self.explaining: list[str] = []
        self.head_lines: list[str] = []  # what the head said about this rank's failure
        self.outage: str | None = None  # its node's link is down: "unreachable 12 s"

    def compose(self) -> ComposeResult:
        yield Static(self._head_text(), classes="pane-head", id=f"head-{self.rank}")
        yield Static("", classes="pane-why", id=f"why-{self.rank}")
        yield RankLog(id=f"log-{self.rank}")

    def on_mount(self) -> None:
        self.set_interval(FLUSH_SECONDS, self.flush)

    def on_resize(self) -> None:
        self._refresh_head()

    # ingest: called for every line; must stay O(1) and never touch the screen
    def push(self, line: str, kind: str = "info", own: bool = False) -> None:
        """One line with its kind (from core.logclass); `own`: a request of ours, folded."""
        self.received += 1
        if own:
            self.own_requests += 1
            return
        if len(self._pending) == self._pending.maxlen:
            self.dropped += 1
        self._pending.append((line, kind))

    def flush(self) -> None:
        """Move pending lines into the log in one write (the timer calls this)."""
        if not self._pending or not self.is_mounted:
            return
        logs = self.query(RankLog)
        if not logs:
            return  # not composed yet: the next tick writes them
        batch = list(self._pending)
        self._pending.clear()
        self._all.extend(batch)
        shown = self._shown(batch)
        if shown:
            logs.first().add_lines(shown)

    @property
    def lines(self) -> list[str]:
        """Every line kept (raw, unfiltered), oldest first."""
        return [line for line, _kind in list(self._all) + list(self._pending)]

    @property
    def filter_error(self) -> str | None:
        """Why the filter is not a regular expression (it then matches as plain text)."""
        if not self.filter_text:
            return None
        try:
            re.compile(self.filter_text)
        except re.error as exc:
            return str(exc)
        return None

    def _shown(self, lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
        if self.filter_text:
            try:
                pattern = re.compile(self.filter_text, re.IGNORECASE)
                lines = [lk for lk in lines if pattern.search(lk[0])]
            except re.error:
                needle = self.filter_text.lower()
                lines = [lk for lk in lines if needle in lk[0].lower()]
        if self.compact:
            return [(compact_line(line), kind) for line, kind in lines]
        return lines

    def _rewrite(self) -> None:
        logs = self.query(RankLog) if self.is_mounted else None
        if not logs:
            return
        log = logs.first()
        log.clear()
        log.follow = True
        log.add_lines(self._shown(list(self._all)))
        self._refresh_head()

    def watch_filter_text(self) -> None:
        self._rewrite()

    def watch_compact(self) -> None:
        self._rewrite()

    def set_state(self, state: str, progress: float | None = None) -> None:
        self.state = state
        if progress is not None or state != "loading":
            self.progress = progress

    def show_failure(
        self, reason: str, lines: list[str], head_lines: list[str] | None = None
    ) -> None:
        """Show why this rank failed above its log (the lines that explain it and, after a
        worker's death, what the head said about it)."""
        self.reason, self.explaining = reason, list(lines)
        self.head_lines = list(head_lines or [])
        if not self.is_mounted or not self.query(f"#why-{self.rank}"):
            self.call_after_refresh(self.show_failure, reason, lines, head_lines)
            return
        self.add_class("failed")
        why = Text(f"rank {self.rank} on {self.node} failed: {reason}", style="bold")
        for line in lines[-5:]:
            why.append("\n" + compact_line(line.strip())[:400])
        if not lines:
            why.append("\nno log line explains it: scroll the log below", style="italic")
        if self.head_lines:
            why.append("\nthe head says:", style="bold")
            for line in self.head_lines[-3:]:
                why.append("\n" + compact_line(line.strip())[:400])
        self.query_one(f"#why-{self.rank}", Static).update(why)

    # ------------------------------------------------------------ messages
    def on_rank_changed(self, message: msg.RankChanged) -> None:
        event = message.event
        self.flush()  # the lines before the change come first
        self.set_state(event.state.value, event.progress)
        if event.state is ev.RankState.FAILED:
            self.show_failure(event.reason or "failed", list(event.explaining_lines))

    def on_rank_alert(self, message: msg.RankAlert) -> None:
        alert = message.alert
        if self.reason is not None and (self.head_lines or not alert.head_lines):
            return  # already shown, and the alert adds nothing
        # Its own failure's lines stay (they come from its whole log); the head's join them.
        self.show_failure(
            self.reason or alert.reason,
            self.explaining or list(alert.lines),
            list(alert.head_lines),
        )

    def on_node_outage(self, message: msg.NodeOutage) -> None:
        self.outage = f"unreachable {message.event.seconds:.0f} s, retrying"
        self._refresh_head()

    def on_node_back(self, message: msg.NodeBack) -> None:
        self.outage = None
        self._refresh_head()

    def on_cluster_stopped(self, message: msg.ClusterStopped) -> None:
        self.flush()
        self.outage = None
        if self.state != "failed":
            self.set_state("stopped")

    def watch_state(self) -> None:
        self._refresh_head()

    def watch_progress(self) -> None:
        self._refresh_head()

    def _refresh_head(self) -> None:
        if not self.is_mounted:
            return
        heads = self.query(f"#head-{self.rank}")
        if heads:
            heads.first(Static).update(self._head_text())
        else:  # mounted, children not yet: once they are
            self.call_after_refresh(self._refresh_head)

    def _head_text(self) -> Text:
        """`rank 0 spark-a head  loading 63% ━━━━──`, shortened to fit the pane."""
        width = (self.size.width or 80) - 4  # border and padding
        state_style = {
            "ready": "bold green",
            "failed": "bold red",
            "loading": "bold yellow",
            "starting": "yellow",
            "created": "yellow",
            "stopped": "dim",
        }.get(self.state, "dim")
        # Shorten in order of least use: the role, then the own-request count's wording,
        # then "rank 0" to "#0"; the rank's number, node and state always stay.
        n = self.own_requests
        own_long = f"  {n} own request{'' if n == 1 else 's'} hidden" if n else ""
        own_short = f"  {n} hidden" if n else ""
        loading = self.state == "loading" and self.progress is not None
        tries = (
            (f"rank {self.rank}", self.role, own_long),
            (f"rank {self.rank}", None, own_long),
            (f"rank {self.rank}", None, own_short),
            (f"#{self.rank}", None, own_short),
        )
        for label, role, own in tries:
            tail = Text(self.state, style=state_style)
            if loading:
                tail.append(f" {self.progress:.0%}")
            if self.outage:
                tail.append(f"  {self.outage}", style="bold yellow")
            if self.filter_text:
                tail.append(f"  /{self.filter_text}", style="italic")
                if self.filter_error:
                    tail.append(" (not a regex: plain text)", style="bold red")
            if own:
                tail.append(own, style="dim")
            head = Text(no_wrap=True, overflow="ellipsis")
            head.append(label, style="bold")
            head.append(f" {self.node}")
            if role:
                head.append(f" {role}", style="dim")
            head.append("  ")
            if head.cell_len + tail.cell_len <= width:
                break
        head.append_text(tail)
        if loading:
            room = min(20, width - head.cell_len - 1)
            if room >= 4:
                filled = int((self.progress or 0.0) * room)
                head.append(" ")
                head.append("━" * filled, style="green")
                head.append("─" * (room - filled), style="dim")
        return head

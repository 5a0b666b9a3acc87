"""One rank's log: bounded buffers, writes batched on a timer, follow-the-tail, `/` filter."""

from __future__ import annotations

import re
from collections import deque

from rich.highlighter import RegexHighlighter
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Log, Static

# The pane keeps this many lines for the `/` filter; older ones are dropped.
KEEP_LINES = 10_000
# The log widget itself holds this many lines of scroll-back (the filter re-reads KEEP_LINES).
SHOWN_LINES = 5_000
# Lines arriving faster than the screen can take wait here; beyond it the oldest are dropped
# (and counted) rather than letting memory grow without bound.
PENDING_LIMIT = 10_000
FLUSH_SECONDS = 0.1


class VllmLogHighlighter(RegexHighlighter):
    """Colours vLLM levels and the phrases that explain a failure."""

    base_style = "log."
    highlights = [  # noqa: RUF012 - Rich reads this class attribute
        r"(?P<error>\bERROR\b|Traceback.*|\w+Error:.*|NCCL WARN.*|Free memory on device.*"
        r"|KV cache is needed.*|No available memory for the cache blocks.*"
        r"|Address already in use.*|must be divisible by.*)",
        r"(?P<warning>\bWARNING\b)",
        r"(?P<ready>Application startup complete\.|Uvicorn running on \S+)",
        r"(?P<progress>\d+% Completed \| \d+/\d+)",
    ]


class RankLog(Log):
    """A `Log` that highlights at render time only, so ingest stays cheap."""

    DEFAULT_CSS = """
    RankLog { height: 1fr; border: none; padding: 0 0; scrollbar-size: 1 1; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(highlight=True, max_lines=SHOWN_LINES, **kwargs)  # type: ignore[arg-type]
        self.highlighter = VllmLogHighlighter()


class LogPane(Vertical):
    """Header (rank, node, state, progress), the failure's explaining lines, and the log."""

    DEFAULT_CSS = """
    LogPane { border: round $panel-lighten-2; height: 1fr; min-height: 5; }
    LogPane:focus-within { border: round $primary; }
    LogPane > .pane-head { height: 1; padding: 0 1; background: $panel; }
    LogPane > .pane-why { height: auto; max-height: 4; padding: 0 1; color: $error; display: none; }
    LogPane.failed > .pane-why { display: block; }
    """

    state: reactive[str] = reactive("idle")
    progress: reactive[float | None] = reactive(None)
    filter_text: reactive[str] = reactive("")

    def __init__(self, rank: int, node: str, *, id: str | None = None) -> None:
        super().__init__(id=id or f"rank-{rank}")
        self.rank = rank
        self.node = node
        self._all: deque[str] = deque(maxlen=KEEP_LINES)
        self._pending: deque[str] = deque(maxlen=PENDING_LIMIT)
        self.received = 0
        self.dropped = 0

    def compose(self) -> ComposeResult:
        yield Static(self._head_text(), classes="pane-head", id=f"head-{self.rank}")
        yield Static("", classes="pane-why", id=f"why-{self.rank}")
        yield RankLog(id=f"log-{self.rank}")

    def on_mount(self) -> None:
        self.set_interval(FLUSH_SECONDS, self.flush)

    # ingest: called for every line; must stay O(1) and never touch the screen
    def push(self, line: str) -> None:
        if len(self._pending) == self._pending.maxlen:
            self.dropped += 1
        self._pending.append(line)
        self.received += 1

    def push_many(self, lines: list[str]) -> None:
        for line in lines:
            self.push(line)

    def flush(self) -> None:
        """Move pending lines into the log in one write (the timer calls this)."""
        if not self._pending:
            return
        batch = list(self._pending)
        self._pending.clear()
        self._all.extend(batch)
        shown = self._matching(batch)
        if shown:
            self.query_one(RankLog).write_lines(shown)

    def _matching(self, lines: list[str]) -> list[str]:
        if not self.filter_text:
            return lines
        try:
            pattern = re.compile(self.filter_text, re.IGNORECASE)
        except re.error:
            needle = self.filter_text.lower()
            return [line for line in lines if needle in line.lower()]
        return [line for line in lines if pattern.search(line)]

    def watch_filter_text(self, _old: str, _new: str) -> None:
        if not self.is_mounted:
            return
        log = self.query_one(RankLog)
        log.clear()
        log.write_lines(self._matching(list(self._all)))
        self._refresh_head()

    def set_state(self, state: str, progress: float | None = None) -> None:
        self.state = state
        if progress is not None or state != "loading":
            self.progress = progress

    def show_failure(self, reason: str, lines: list[str]) -> None:
        """Show why this rank failed above its log."""
        self.add_class("failed")
        why = Text(f"failed: {reason}\n", style="bold")
        for line in lines[-3:]:
            why.append(line.strip()[:400] + "\n")
        self.query_one(f"#why-{self.rank}", Static).update(why)

    def reset(self, node: str | None = None) -> None:
        """Empty the pane for a new launch."""
        self.node = node or self.node
        self._all.clear()
        self._pending.clear()
        self.received = self.dropped = 0
        self.remove_class("failed")
        self.state, self.progress = "idle", None
        if self.is_mounted:
            self.query_one(RankLog).clear()
            self.query_one(f"#why-{self.rank}", Static).update("")

    def watch_state(self) -> None:
        self._refresh_head()

    def watch_progress(self) -> None:
        self._refresh_head()

    def _refresh_head(self) -> None:
        if self.is_mounted:
            self.query_one(f"#head-{self.rank}", Static).update(self._head_text())

    def _head_text(self) -> Text:
        style = {
            "ready": "bold green",
            "failed": "bold red",
            "loading": "yellow",
            "starting": "yellow",
            "stopped": "dim",
        }.get(self.state, "")
        text = Text(f"rank {self.rank}  {self.node}  ")
        text.append(self.state, style=style)
        if self.state == "loading" and self.progress is not None:
            filled = int(self.progress * 20)
            text.append(f" {self.progress:4.0%} ")
            text.append("━" * filled, style="green")
            text.append("─" * (20 - filled), style="dim")
        if self.filter_text:
            text.append(f"  filter: /{self.filter_text}", style="italic")
        return text

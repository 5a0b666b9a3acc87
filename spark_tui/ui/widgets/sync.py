"""The sync view: one progress bar per node and item (bytes, rate, ETA) while the model and
the image go to every node, then what was done on each node.

The view draws a `service.sync.SyncTally` that the main screen feeds with the sync's
events; it redraws on a timer (progress events come by the thousand), at once when a sync
step, a result or an error arrives (`SyncUpdated`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from rich.console import Group
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static

# The sync's tally and events are imported where a sync starts: the first frame has none.
if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.service.events import ServiceEvent, SyncEvent
    from spark_tui.service.sync import SyncRow, SyncTally
    from spark_tui.ui.screens.main import MainScreen

REDRAW_SECONDS = 0.25
_STATE_STYLE = {
    "complete": "green",
    "failed": "bold red",
    "copy": "cyan",
    "download": "cyan",
    "pull": "cyan",
    "check": "dim",
    "waiting": "dim",
}
_LABEL = {"copy": "copying", "download": "downloading", "pull": "pulling", "check": "checking"}


class SyncUpdated(Message, bubble=False):
    """A sync took a step, finished an item or said something (progress is not posted)."""

    def __init__(self, event: ServiceEvent) -> None:
        super().__init__()
        self.event = event


def _gb(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e9:.2f}"


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    m, s = divmod(int(seconds + 0.5), 60)
    return f"ETA {m}:{s:02d}"


def _item(row: SyncRow, width: int = 34) -> str:
    from spark_tui.service.sync import IMAGE

    text = row.item if row.kind != IMAGE else f"image {row.item}"
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def _figures(row: SyncRow) -> str:
    if row.state in ("copy", "download", "pull") and (row.done_bytes or row.total_bytes):
        total = f"/{_gb(row.total_bytes)}" if row.total_bytes else ""
        rate = f"{row.rate_bytes_per_s / 1e6:.0f} MB/s" if row.rate_bytes_per_s else "? MB/s"
        return f"{_gb(row.done_bytes)}{total} GB  {rate}  {_eta(row.eta_seconds)}"
    if row.state == "complete" and row.sent_bytes:
        return f"{_gb(row.sent_bytes)} GB sent"
    return ""


def render_sync(tally: SyncTally, bar_width: int = 24) -> Group:
    """Every node and item on a line (its state, or once done what was done there), with
    a progress bar, bytes, rate and ETA under it while it transfers; the errors and
    warnings with their remedies below."""
    width = max((len(r.node) for r in tally.rows.values()), default=0)
    parts: list[object] = []
    for row in tally.rows.values():
        line = Text(f"{row.node:<{width}}  ", style="bold")
        line.append(_item(row, 48))
        line.append("  ")
        style = _STATE_STYLE.get(row.state, "")
        line.append(row.outcome if row.finished else _LABEL.get(row.state, row.state), style=style)
        parts.append(line)
        if row.finished or row.state not in ("copy", "download", "pull"):
            continue
        fraction = row.fraction
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=max(0, width - 1))
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True)
        bar = (
            ProgressBar(total=None, width=bar_width, pulse=True)
            if fraction is None
            else ProgressBar(total=1.0, completed=fraction, width=bar_width)
        )
        pct = f"{fraction:4.0%}  " if fraction is not None else ""
        grid.add_row("", bar, Text(pct + _figures(row), style="cyan"))
        parts.append(grid)
    for notice in tally.notices:
        if notice.level in ("error", "warning"):
            line = Text(f"{notice.level}: ", style="red" if notice.level == "error" else "yellow")
            line.append(notice.message)
            if notice.remedy:
                line.append(f"\n  → {notice.remedy}", style="dim")
            parts.append(line)
    if tally.done:
        verdict = "complete on every node" if tally.ok else "not complete on every node"
        parts.append(Text(verdict, style="bold green" if tally.ok else "bold red"))
    return Group(*parts)  # type: ignore[arg-type]


class SyncView(Static):
    """The tally, redrawn when it changed."""

    def __init__(self, tally: SyncTally, **kw: object) -> None:
        super().__init__(render_sync(tally), **kw)  # type: ignore[arg-type]
        self.tally = tally
        self._drawn = -1

    def on_mount(self) -> None:
        self.set_interval(REDRAW_SECONDS, self.redraw)

    def redraw(self, force: bool = False) -> None:
        if force or self._drawn != self.tally.version:
            self._drawn = self.tally.version
            self.update(render_sync(self.tally))


class SyncScreen(ModalScreen[None]):
    """The sync of one recipe; Esc closes the view and the sync goes on."""

    DEFAULT_CSS = """
    SyncScreen { align: center middle; }
    SyncScreen > Vertical { width: 90%; max-width: 140; height: auto; max-height: 90%;
                            border: round $primary; background: $surface; padding: 0 1; }
    SyncScreen #sync-scroll { height: auto; max-height: 30; }
    SyncScreen #sync-hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape,q", "dismiss", "close (the sync goes on)")]  # noqa: RUF012

    def __init__(self, tally: SyncTally, title: str, hint: str) -> None:
        super().__init__()
        self.tally = tally
        self.title_text = title
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = self.title_text
            with VerticalScroll(id="sync-scroll"):
                yield SyncView(self.tally, id="sync-view")
            yield Static(self.hint, id="sync-hint")

    def redraw(self) -> None:
        self.query_one(SyncView).redraw(force=True)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


class CockpitSync:
    """The cockpit's sync action on the selected recipe: the service's model sync, then its
    image sync, both into one tally that the view draws; the nodes are probed again at the
    end, so the fit panel shows what is left."""

    def __init__(self, screen: MainScreen) -> None:
        self.screen = screen
        self.tally: SyncTally | None = None
        self.recipe: str | None = None
        self.running = False

    @property
    def key(self) -> str:
        return self.screen.spark.key_of("sync", "m")

    def remedy(self) -> str:
        return f"press {self.key} to sync (downloads once, copies node to node)"

    def action(self, recipe: Recipe | None) -> None:
        screen = self.screen
        if self.running and self.tally is not None:
            self._open()  # the sync goes on: show it again
            return
        from spark_tui.ui.flows.guard import may_start  # loaded on the first sync

        if not may_start(screen, recipe) or recipe is None:
            return
        self.tally = self._rows(recipe, screen.sets.get(recipe.name, {}))
        self.recipe = recipe.name
        self.running = True
        screen.busy = "sync"
        self._open()
        screen.app.run_worker(
            self._run(recipe, dict(screen.sets.get(recipe.name, {}))),
            name="sync",
            group="sync",
            exclusive=True,
            exit_on_error=False,
        )

    def _rows(self, recipe: Recipe, sets: dict[str, str]) -> SyncTally:
        """A tally with a waiting row per node for the model, the draft and the image,
        so the view shows the whole sync from the start."""
        from spark_tui.core.errors import SparkError
        from spark_tui.service.sync import IMAGE, MODELS, SyncRow, SyncTally, model_needs_of

        tally = SyncTally(expected=2)
        try:
            items = [(n.repo_id, MODELS) for n in model_needs_of(recipe, sets)]
        except SparkError:
            items = []  # the sync itself says what is wrong
        if recipe.container:
            items.append((recipe.container, IMAGE))
        for node in self.screen.nodes:
            for item, kind in items:
                tally.rows[(node.name, item)] = SyncRow(node.name, item, kind)
        return tally

    def _open(self) -> None:
        assert self.tally is not None
        if isinstance(self.screen.app.screen, SyncScreen):
            return
        hint = f"esc closes this view, the sync goes on ({self.key} shows it again)"
        self.screen.app.push_screen(SyncScreen(self.tally, f"Sync: {self.recipe}", hint))

    async def _run(self, recipe: Recipe, sets: dict[str, str]) -> None:
        from spark_tui.core.errors import SparkError
        from spark_tui.service.sync import IMAGE, MODELS

        screen, session = self.screen, self.screen.session
        screen.show_status(f"syncing {recipe.name}: the model, then the image, on every node…")
        try:
            actions: list[tuple[str, Callable[[], AsyncIterator[SyncEvent]]]] = [
                (MODELS, lambda: session.sync_models(recipe, sets, where=session.where)),
                (IMAGE, lambda: session.sync_image(recipe, probe_after=True)),
            ]
            for kind, events in actions:
                try:
                    await screen.consume(events())
                except SparkError as exc:
                    # Said in the view too, with its remedy; the next sync still runs.
                    if self.tally is not None:
                        self.tally.abort(exc.message, exc.remedy, kind)
                    screen.show_error(exc.message, exc.remedy)
        finally:
            self.running = False
            if self.tally is not None and not self.tally.done:
                # A fault of ours (the app shows it and keeps its details): the view ends
                # all the same instead of showing a transfer that no longer runs.
                self.tally.abort(
                    "the sync stopped on an unexpected error (see the status line)",
                    f"press {self.key} to run it again; if it happens again, please report it",
                )
            screen.busy = None if screen.busy == "sync" else screen.busy
            self._redraw()
            self._say_result()

    def take(self, event: ServiceEvent) -> bool:
        """Fold a sync event into the tally (True: nothing else shows it); a notice is
        taken and still shown as usual."""
        from spark_tui.service.events import Notice, SyncProgress

        if self.tally is None or not self.running or not self.tally.apply(event):
            return False
        if not isinstance(event, SyncProgress):
            self.screen.post_message(SyncUpdated(event))
        return not isinstance(event, Notice)

    def updated(self, event: ServiceEvent) -> None:
        from spark_tui.service.events import SyncStep

        self._redraw()
        if isinstance(event, SyncStep):
            self.screen.show_status(f"sync: {event.node}: {event.message}")

    def _redraw(self) -> None:
        top = self.screen.app.screen
        if isinstance(top, SyncScreen):
            top.redraw()

    def _say_result(self) -> None:
        tally = self.tally
        if tally is None:
            return
        failed = sorted({r.node for r in tally.rows.values() if r.state == "failed"})
        if tally.ok:
            self.screen.show_status(
                Text(f"{self.recipe}: model and image complete on every node", style="bold green")
            )
        else:
            where = ", ".join(failed) or "some nodes"
            self.screen.show_status(
                Text(
                    f"{self.recipe}: sync not complete on {where} ({self.key} shows what "
                    "happened; a new sync resumes)",
                    style="bold red",
                )
            )

"""Read-only screens: help, the last results in full, and the run history."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

INFO_CSS = """
HelpScreen, HistoryScreen, ResultsScreen { align: center middle; }
.info { width: 96; max-width: 98%; height: auto; max-height: 96%; border: round $primary;
        background: $surface; padding: 0 1; }
.info .title { text-style: bold; color: $primary; }
"""


class HelpScreen(ModalScreen[None]):
    """Every key and what it does; Esc or ? closes."""

    DEFAULT_CSS = INFO_CSS
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close")]  # noqa: RUF012

    def __init__(self, rows: list[tuple[str, str]], notes: str) -> None:
        super().__init__()
        self.rows, self.notes = rows, notes

    @classmethod
    def for_bindings(
        cls, bindings: Iterable[object], key_of: Callable[[str, str], str]
    ) -> HelpScreen:
        """The help for these bindings, each with the key that runs it now."""
        rows = [
            (key_of(b.id or "", b.key), b.description) for b in bindings if isinstance(b, Binding)
        ]
        rows += [
            ("ctrl+p", "command palette: every action, and the themes"),
            ("tab / shift+tab", "next / previous panel"),
            (
                "space",
                "in the nodes panel: pick the highlighted node for the launch, or take "
                "it out (the first picked is the head; none picked: the first nodes it needs)",
            ),
            ("↑ ↓ pgup pgdn", "move in a list, scroll a log (scrolling up stops following)"),
            ("end", "in a log: back to the tail (follows again)"),
        ]
        notes = (
            "Keys can be remapped in the config file (keys: {launch: f5}).\n"
            "The fit check runs before every launch; l refuses a recipe that does not fit\n"
            "unless you insist. Quitting with a cluster running asks whether to stop it.\n"
            "When a rank fails, every rank is stopped and its last lines kept in the history;\n"
            "k keeps them for inspection instead (keep_failed: true in the config file)."
        )
        return cls(rows, notes)

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 1), expand=False)
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for key, what in self.rows:
            table.add_row(key, what)
        with VerticalScroll(classes="info"):
            yield Static("spark-tui keys (Esc closes)", classes="title", markup=False)
            yield Static(table)
            yield Static(Text(self.notes, style="dim"))


class ResultsScreen(ModalScreen[None]):
    """The last benchmark and comparison in full, scrolled with the arrows; Esc closes."""

    DEFAULT_CSS = (
        INFO_CSS
        + """
    ResultsScreen .info { width: 98%; height: 96%; }
    """
    )
    BINDINGS = [Binding("escape,v,q", "dismiss", "close")]  # noqa: RUF012

    def __init__(self, parts: list[RenderableType]) -> None:
        super().__init__()
        self.parts = parts

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="info", id="results-view"):
            yield Static("Results (↑↓ pgup pgdn scroll, Esc closes)", classes="title", markup=False)
            for part in self.parts:
                yield Static(part)

    def on_mount(self) -> None:
        self.query_one("#results-view").focus()


class HistoryScreen(ModalScreen[None]):
    """Runs recorded so far, newest first; the selected run's comparison with its baseline."""

    DEFAULT_CSS = (
        INFO_CSS
        + """
    HistoryScreen .info { width: 98%; height: 96%; }
    HistoryScreen DataTable { height: 1fr; min-height: 4; }
    HistoryScreen #history-detail-scroll { height: auto; max-height: 60%; }
    HistoryScreen #history-detail-scroll:focus { background: $boost; }
    """
    )
    BINDINGS = [  # noqa: RUF012
        Binding("escape,h,q", "dismiss", "close"),
        Binding("b", "pin", "use as the baseline"),
    ]

    def __init__(
        self,
        runs: list[dict[str, Any]],
        describe: Callable[[str], RenderableType],
        pin: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__()
        self.runs, self.describe, self.pin = runs, describe, pin
        self.current: str | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="info"):
            yield Static(
                "History (↑↓ a run, tab its details (scroll), b use it as the baseline, Esc close)",
                classes="title",
                markup=False,
            )
            yield DataTable(id="history-table", cursor_type="row")
            with VerticalScroll(id="history-detail-scroll"):
                yield Static("", id="history-detail")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        # What tells runs apart first (the id holds the time): on a small terminal the
        # columns past the edge are the least needed (the table scrolls sideways to them).
        table.add_columns("run", "kind", "outcome", "change", "result", "recipe", "when")
        for run in self.runs:
            table.add_row(
                run.get("id", "?"),
                run.get("kind", ""),
                run.get("outcome", ""),
                run.get("change", ""),
                run.get("summary", ""),
                run.get("recipe", ""),
                run.get("time", ""),
                key=run.get("id"),
            )
        if not self.runs:
            self.query_one("#history-detail", Static).update(
                Text(
                    "no runs yet: launch a recipe (l), run the smoke checks (t) or a benchmark (b)"
                )
            )
        table.focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._describe(event.row_key.value)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self._describe(event.row_key.value)

    def action_pin(self) -> None:
        if self.pin is None or self.current is None:
            return
        self.notify(self.pin(self.current))
        self._describe(self.current)

    def _describe(self, key: str | None) -> None:
        self.current = key
        if key is not None:
            self.query_one("#history-detail", Static).update(self.describe(key))

"""A sweep's result in the cockpit: the table (value x figures, verdicts, the objective
against the baseline with the noise threshold), why a value did not start, and the chart;
and the question an interrupted sweep asks (what to leave running)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Static

from spark_tui.core.sweep_result import SweepResult
from spark_tui.ui.screens.dialogs import DIALOG_CSS
from spark_tui.ui.widgets.sweepchart import SweepChart

VERDICT_STYLES = {"meets": "green", "fails": "red", "did not start": "bold red", "failed": "red"}


def table_renderable(result: SweepResult) -> Table:
    """The sweep's table as a Rich table (the same cells as `SweepResult.table()`)."""
    rows = result.table()
    table = Table(box=None, pad_edge=False, header_style="bold", expand=False)
    for i, heading in enumerate(rows[0]):
        table.add_column(heading, justify="left" if i < 2 else "right", no_wrap=True)
    best = result.best()
    ordered = result.ordered_rows()
    for row, cells in zip(ordered, rows[1:], strict=True):
        styled = [Text(c) for c in cells]
        styled[1].stylize(VERDICT_STYLES.get(cells[1], ""))
        if best is not None and row is best:
            styled[0].stylize("bold")
            styled[0].append(" ★", style="bold green")
        table.add_row(*styled)
    return table


def notes_text(result: SweepResult) -> Text:
    """Why each value failed or did not start (the ranks' last lines), the best, the rule."""
    out = Text()
    for row in result.ordered_rows():
        verdict = row.verdict(result.targets, result.objective)
        if row.measured and verdict.missed:
            out.append(f"{row.value}: ", style="bold")
            out.append(verdict.text() + "\n", style="red")
        elif not row.measured:
            out.append(f"{row.value}: {row.status}: ", style="bold red")
            out.append(f"{row.reason or 'no reason given'}\n")
            if row.remedy:
                out.append(f"  → {row.remedy}\n", style="dim")
            for rank, tail in row.rank_lines.items():
                for line in tail[-2:]:
                    out.append(f"  [{rank}] {line}\n", style="dim")
    out.append(result.best_text() + "\n", style="bold green" if result.best() else "bold red")
    out.append(
        "vs base: the objective against the baseline's, + better, ! worse, ~ within noise "
        "(noise: the comparison's threshold)",
        style="dim",
    )
    return out


class SweepScreen(ModalScreen[None]):
    """The result of a sweep (or the rows so far); `f` charts the next figure, Esc closes."""

    DEFAULT_CSS = """
    SweepScreen { align: center middle; }
    SweepScreen #sweep-box { width: 100%; height: 100%; border: round $primary;
                             background: $surface; }
    SweepScreen #sweep-title { text-style: bold; color: $primary; padding: 0 1; }
    SweepScreen #sweep-goal { color: $text-muted; padding: 0 1; }
    SweepScreen #sweep-table { padding: 0 1; height: auto; }
    SweepScreen #sweep-notes { padding: 0 1; height: auto; margin-bottom: 1; }
    """
    BINDINGS = [  # noqa: RUF012
        Binding("escape,q", "close", "close"),
        Binding("f", "next_figure", "next figure"),
    ]

    def __init__(self, result: SweepResult) -> None:
        super().__init__()
        self.result = result

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-box"):
            yield Static(self._title(), id="sweep-title", markup=False)
            with VerticalScroll(id="sweep-scroll"):
                yield Static(self._goal(), id="sweep-goal", markup=False)
                yield Static(table_renderable(self.result), id="sweep-table")
                yield Static(notes_text(self.result), id="sweep-notes", markup=False)
                yield SweepChart(self.result, id="sweep-chart")
        yield Footer()

    def _title(self) -> str:
        state = "" if self.result.done else " (interrupted)" if self.result.interrupted else " …"
        return f"Sweep of {self.result.setting} on {self.result.recipe}{state}"

    def _goal(self) -> Text:
        targets = ", ".join(t.text() for t in self.result.targets) or "none"
        base = self.result.baseline_id or "-"
        return Text(f"targets: {targets} · {self.result.objective.text()} · baseline {base}")

    def on_mount(self) -> None:
        self.query_one("#sweep-scroll", VerticalScroll).focus()

    def show(self, result: SweepResult) -> None:
        """The rows as they come (the screen may be open while the sweep runs)."""
        self.result = result
        self.query_one("#sweep-title", Static).update(self._title())
        self.query_one("#sweep-table", Static).update(table_renderable(result))
        self.query_one("#sweep-notes", Static).update(notes_text(result))
        self.query_one(SweepChart).show(result)

    def action_next_figure(self) -> None:
        name = self.query_one(SweepChart).next_figure()
        self.notify(f"chart: {name}")

    def action_close(self) -> None:
        self.dismiss(None)


class LeaveSweepDialog(ModalScreen[str]):
    """Ending a sweep: leave the best value so far, the baseline or nothing running; or go
    on sweeping."""

    DEFAULT_CSS = DIALOG_CSS + "LeaveSweepDialog { align: center middle; }"
    BINDINGS = [  # noqa: RUF012
        Binding("b", "choose('best')", "best so far"),
        Binding("a", "choose('baseline')", "baseline"),
        Binding("n", "choose('nothing')", "nothing"),
        Binding("c,escape", "choose('continue')", "continue"),
    ]

    def __init__(self, result: SweepResult) -> None:
        super().__init__()
        self.result = result

    def compose(self) -> ComposeResult:
        done = len(self.result.rows)
        with Vertical(classes="dialog"):
            yield Static("End the sweep?", classes="title", markup=False)
            yield Static(
                f"{done} of {len(self.result.raws)} values measured; "
                f"{self.result.best_text()}.\nWhat should be left running? "
                "(`tune --sweep ... --resume` continues the sweep later)",
                classes="body",
                markup=False,
            )
            with Horizontal():
                yield Button("Continue \\[c]", id="continue", compact=True)
                yield Button("Nothing \\[n]", id="nothing", compact=True)
                yield Button("Baseline \\[a]", id="baseline", compact=True)
                yield Button("Best so far \\[b]", id="best", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one("#continue", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "continue")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

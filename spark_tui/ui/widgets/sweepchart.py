"""A sweep's chart: one figure against the values swept, as bars in text, with the targets
on that figure drawn across. Plain Rich text (no plotting library): it reads the same in
16 colours, over SSH and in the SVG screenshots."""

from __future__ import annotations

import math

from rich.text import Text
from textual.widgets import Static

from spark_tui.core.sweep import FIGURE_NAMES, show_figure
from spark_tui.core.sweep_result import SweepResult, chart_points

BAR = "█"
MISSING = "✗"


def figure_choices(result: SweepResult) -> list[tuple[str, int | None]]:
    """The (figure, level) pairs worth a chart: the objective's, then each target's."""
    out = [(result.objective.figure, result.objective.concurrency)]
    for t in result.targets:
        if (t.figure, t.concurrency) not in out:
            out.append((t.figure, t.concurrency))
    return out


def _name(figure: str, conc: int | None) -> str:
    name = next((k for k, v in FIGURE_NAMES.items() if v == figure), figure)
    return name + (f"@c{conc}" if conc else "")


def chart_text(
    result: SweepResult, figure: str, conc: int | None, *, width: int = 76, height: int = 8
) -> Text:
    """The chart of `figure` (at `conc`, None: each value's highest level) for each value in
    the order given; targets on this figure drawn as a dashed line with their limit."""
    points = chart_points(result, figure, conc)
    targets = [t for t in result.targets if t.figure == figure and (t.concurrency in (conc, None))]
    known = [p for p in points if p is not None]
    top = max([*known, *(t.limit for t in targets), 0.0])
    top = top * 1.15 if top > 0 else 1.0
    labels = [str(v) for v in result.values]
    axis = max(len(show_figure(figure, top)), len(show_figure(figure, 0.0))) + 1
    # Wide enough for "no start" under each bar, no wider than a comfortable bar.
    col = min(14, max(10, *(len(label) + 2 for label in labels)))
    col = min(col, max(3, (width - axis - 2) // max(1, len(labels))))
    best = result.best()
    verdicts = {r.raw: r.verdict(result.targets, result.objective) for r in result.rows}
    target_rows = {
        max(1, min(height, round(t.limit / top * height))): t for t in targets if top > 0
    }

    def level_of(value: float) -> int:
        return max(1 if value > 0 else 0, min(height, math.ceil(value / top * height - 1e-9)))

    out = Text()
    out.append(f"{_name(figure, conc)} against {result.setting}", style="bold")
    if targets:
        out.append(
            "   " + ", ".join(f"target {t.op} {show_figure(figure, t.limit)}" for t in targets),
            style="yellow",
        )
    out.append("\n")
    for row in range(height, 0, -1):
        if row == height:
            out.append(show_figure(figure, top).rjust(axis - 1) + " ┤", style="dim")
        elif row in target_rows:
            out.append(
                show_figure(figure, target_rows[row].limit).rjust(axis - 1) + " ┤", style="yellow"
            )
        else:
            out.append(" " * (axis - 1) + " │", style="dim")
        for i, point in enumerate(points):
            raw = result.raws[i]
            cell = " " * col
            style = ""
            if point is not None and level_of(point) >= row:
                bar = BAR * max(1, min(6, col - 3))
                v = verdicts.get(raw)
                style = "green" if v is not None and v.meets else "red"
                if row in target_rows:  # the target's line runs on either side of the bar
                    out.append("╌", style="yellow")
                    out.append(bar, style=style)
                    out.append("╌" * (col - 1 - len(bar)), style="yellow")
                    continue
                cell = (" " + bar).ljust(col)
            elif row in target_rows:
                cell, style = "╌" * col, "yellow"
            elif point is None and row == 1 and result.row_for(i) is not None:
                cell = (" " + MISSING).ljust(col)
                style = "bold red"
            out.append(cell, style=style)
        out.append("\n")
    out.append(" " * (axis - 1) + " └" + "─" * (col * len(points)) + "\n", style="dim")
    out.append(" " * (axis + 1))
    for i, label in enumerate(labels):
        row = result.row_for(i)
        style = "bold" if best is not None and row is best else ""
        out.append((" " + label)[:col].ljust(col), style=style)
    out.append("\n" + " " * (axis + 1))
    for i in range(len(labels)):
        row = result.row_for(i)
        if row is None:
            mark, style = "…", "dim"
        elif best is not None and row is best:
            mark, style = "best", "bold green"
        elif not row.measured:
            mark, style = "no start", "red"
        elif verdicts[row.raw].meets:
            mark, style = "meets", "green"
        else:
            mark, style = "fails", "red"
        out.append((" " + mark)[:col].ljust(col), style=style)
    return out


class SweepChart(Static):
    """The chart of one figure of a sweep; `next_figure()` turns to the next one."""

    DEFAULT_CSS = "SweepChart { height: auto; padding: 0 1; }"

    def __init__(self, result: SweepResult, **kw: object) -> None:
        super().__init__("", markup=False, **kw)  # type: ignore[arg-type]
        self.result = result
        self.choice = 0

    def on_mount(self) -> None:
        self.refresh_chart()

    def on_resize(self) -> None:
        self.refresh_chart()

    def show(self, result: SweepResult) -> None:
        self.result = result
        self.refresh_chart()

    def next_figure(self) -> str:
        choices = figure_choices(self.result)
        self.choice = (self.choice + 1) % len(choices)
        self.refresh_chart()
        figure, conc = choices[self.choice]
        return _name(figure, conc)

    def refresh_chart(self) -> None:
        choices = figure_choices(self.result)
        figure, conc = choices[self.choice % len(choices)]
        width = self.size.width or 76
        height = 8 if (self.app.size.height if self.is_attached else 48) >= 30 else 6
        self.update(chart_text(self.result, figure, conc, width=width - 2, height=height))

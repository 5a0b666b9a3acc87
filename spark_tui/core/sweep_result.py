"""A sweep's result: one row per value (measured, or why it did not start), the best value
that meets the targets, and the table every interface prints. Kept in the history as a
run of kind `sweep` (its `results["sweep"]`), updated after each value: `--resume` reads
it back and measures only the values without a row."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from spark_tui.core.sweep import (
    FIGURE_NAMES,
    Levels,
    Objective,
    Target,
    Verdict,
    best_of,
    show_figure,
    verdict,
)
from spark_tui.core.wording import setting_text

# Row states.
MEASURED = "measured"
NOT_STARTED = "did not start"  # vLLM refused it, out of memory, the fit check said no
FAILED = "failed"  # started, then the check of every rank or the smoke checks failed
# Lines of each rank's log kept in a row that did not start.
ROW_LINES = 6


@dataclass
class SweepRow:
    """One value: how it went, its benchmark's figures per level, its verdict, and its
    objective against the baseline with the noise rule's threshold."""

    value: Any
    raw: str
    status: str
    reason: str | None = None
    remedy: str | None = None
    rank_lines: dict[str, list[str]] = field(default_factory=dict)  # "rank 0 spark-a" -> tail
    launch_id: str | None = None
    bench_id: str | None = None
    levels: dict[int, dict[str, float | None]] = field(default_factory=dict)
    seconds: float = 0.0
    is_baseline: bool = False  # the baseline's own value: its benchmark, not a relaunch
    # The objective figure against the baseline's, as `ops.compare` judges it.
    delta_pct: float | None = None
    noise_pct: float | None = None
    noise_verdict: str | None = None

    @property
    def measured(self) -> bool:
        return self.status == MEASURED

    def verdict(self, targets: list[Target], objective: Objective) -> Verdict:
        return verdict(self.levels if self.measured else None, targets, objective)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["levels"] = {str(k): v for k, v in self.levels.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepRow:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["levels"] = {int(k): dict(v) for k, v in (data.get("levels") or {}).items()}
        known["rank_lines"] = {str(k): list(v) for k, v in (data.get("rank_lines") or {}).items()}
        return cls(**known)


@dataclass
class SweepResult:
    """The whole sweep (see module doc)."""

    recipe: str
    setting: str
    raws: list[str]
    values: list[Any]
    targets: list[Target]
    objective: Objective
    overrides: dict[str, Any]  # the running settings every value changes one of
    baseline_id: str | None = None
    baseline_value: Any = None
    cluster_key: str | None = None
    rows: list[SweepRow] = field(default_factory=list)
    done: bool = False
    interrupted: bool = False
    run_id: str | None = None  # its record in the history

    # -- what it found ---------------------------------------------------------------------

    def row_for(self, index: int) -> SweepRow | None:
        raw = self.raws[index]
        return next((r for r in self.rows if r.raw == raw), None)

    def ordered_rows(self) -> list[SweepRow]:
        """The rows in the order the values were given."""
        return [r for i in range(len(self.raws)) if (r := self.row_for(i)) is not None]

    def verdicts(self) -> list[Verdict]:
        return [r.verdict(self.targets, self.objective) for r in self.ordered_rows()]

    def best(self) -> SweepRow | None:
        """The best row that meets every target (None: none does)."""
        rows = self.ordered_rows()
        index = best_of([r.verdict(self.targets, self.objective) for r in rows], self.objective)
        return None if index is None else rows[index]

    def best_text(self) -> str:
        best = self.best()
        if best is None:
            measured = [r for r in self.rows if r.measured]
            if not measured:
                return "no value was measured"
            return "no value meets the targets"
        figure = self.objective.figure
        conc = self.objective.level(best.levels)
        value = best.verdict(self.targets, self.objective).objective
        text = (
            f"best: {setting_text(self.setting, best.value)} "
            f"({show_figure(figure, value)} {self.objective.text().split(' ', 1)[1]}"
            f"{'' if self.objective.concurrency or conc is None else f' at c{conc}'})"
        )
        close = self._within_noise_of_best(best)
        if close:
            text += "; within noise of " + ", ".join(close)
        return text

    def _within_noise_of_best(self, best: SweepRow) -> list[str]:
        """Other values that meet the targets whose objective is within the noise of the
        best's (so the pick among them is not a measured difference)."""
        ours = best.verdict(self.targets, self.objective).objective
        if ours is None:
            return []
        close = []
        for row in self.ordered_rows():
            if row is best:
                continue
            v = row.verdict(self.targets, self.objective)
            if not v.meets or v.objective is None or not ours:
                continue
            noise = max(best.noise_pct or 5.0, row.noise_pct or 5.0)
            if abs(ours - v.objective) / abs(ours) * 100 <= noise:
                close.append(str(row.value))
        return close

    def left(self) -> list[int]:
        """The indexes of the values without a row yet."""
        return [i for i in range(len(self.raws)) if self.row_for(i) is None]

    # -- the table -------------------------------------------------------------------------

    def columns(self) -> list[tuple[str, str, int | None]]:
        """(heading, figure, level) of the figure columns: the objective's, then each
        target's that differs."""
        cols: list[tuple[str, str, int | None]] = []
        seen = set()
        for figure, conc in [(self.objective.figure, self.objective.concurrency)] + [
            (t.figure, t.concurrency) for t in self.targets
        ]:
            if (figure, conc) in seen:
                continue
            seen.add((figure, conc))
            name = next((k for k, v in FIGURE_NAMES.items() if v == figure), figure)
            cols.append((name + (f"@c{conc}" if conc else ""), figure, conc))
        return cols

    def table(self) -> list[list[str]]:
        """Header and one row per value: value, verdict, figures, objective against the
        baseline with the noise threshold."""
        cols = self.columns()
        header = [self.setting, "verdict", *(c[0] for c in cols), "vs base", "noise"]
        out = [header]
        for row in self.ordered_rows():
            v = row.verdict(self.targets, self.objective)
            cells = [str(row.value) + (" (base)" if row.is_baseline else "")]
            if not row.measured:
                cells.append(row.status)
                cells += ["-"] * (len(cols) + 2)
                out.append(cells)
                continue
            cells.append("meets" if v.meets else "fails")
            for _, figure, conc in cols:
                level = conc if conc is not None else (max(row.levels) if row.levels else None)
                value = (row.levels.get(level) or {}).get(figure) if level is not None else None
                cells.append(show_figure(figure, value))
            if row.is_baseline or row.delta_pct is None:
                cells += ["-", "-"]
            else:
                mark = {"better": "+", "worse": "!", "within noise": "~"}.get(
                    row.noise_verdict or "", ""
                )
                cells.append(f"{row.delta_pct:+.1f}%{mark}")
                cells.append("-" if row.noise_pct is None else f"{row.noise_pct:.1f}%")
            out.append(cells)
        return out

    def goal_text(self) -> str:
        """`targets: ttft_p95<=2000 ms@c4; objective: maximize tok_s@c4`."""
        targets = ", ".join(t.text() for t in self.targets) or "none"
        return f"targets: {targets}; objective: {self.objective.text()}"

    def text(self) -> str:
        """The table and what it means, for the terminal and the export."""
        table = self.table()
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        lines = [
            f"sweep of {self.setting} on {self.recipe}: "
            + ", ".join(self.raws)
            + ("" if self.done else " (interrupted)" if self.interrupted else " (running)"),
            self.goal_text(),
        ]
        for i, r in enumerate(table):
            lines.append("  ".join(c.ljust(widths[j]) for j, c in enumerate(r)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        for row in self.ordered_rows():
            v = row.verdict(self.targets, self.objective)
            if row.measured and v.missed:
                lines.append(f"{row.value}: {v.text()}")
            if not row.measured:
                lines.append(f"{row.value}: {row.status}: {row.reason or 'no reason given'}")
                if row.remedy:
                    lines.append(f"  remedy: {row.remedy}")
                for rank, tail in row.rank_lines.items():
                    for line in tail[-3:]:
                        lines.append(f"  [{rank}] {line}")
        lines.append(self.best_text())
        lines.append(
            "vs base: the objective against the baseline's; + better, ! worse, ~ within "
            "noise (beyond noise when |delta| > noise, the comparison's rule)"
        )
        return "\n".join(lines)

    # -- the record ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        best = self.best()
        return {
            "recipe": self.recipe,
            "setting": self.setting,
            "raws": list(self.raws),
            "values": list(self.values),
            "targets": [t.model_dump() for t in self.targets],
            "target_texts": [t.text() for t in self.targets],
            "objective": self.objective.model_dump(),
            "overrides": dict(self.overrides),
            "baseline_id": self.baseline_id,
            "baseline_value": self.baseline_value,
            "cluster_key": self.cluster_key,
            "rows": [
                {
                    **r.to_dict(),
                    "verdict": r.verdict(self.targets, self.objective).text(),
                    "meets": r.verdict(self.targets, self.objective).meets,
                }
                for r in self.ordered_rows()
            ],
            "best": None if best is None else best.value,
            "best_text": self.best_text(),
            "done": self.done,
            "interrupted": self.interrupted,
            "run_id": self.run_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepResult:
        return cls(
            recipe=str(data["recipe"]),
            setting=str(data["setting"]),
            raws=[str(r) for r in data.get("raws") or []],
            values=list(data.get("values") or []),
            targets=[Target(**t) for t in data.get("targets") or []],
            objective=Objective(**(data.get("objective") or {})),
            overrides=dict(data.get("overrides") or {}),
            baseline_id=data.get("baseline_id"),
            baseline_value=data.get("baseline_value"),
            cluster_key=data.get("cluster_key"),
            rows=[SweepRow.from_dict(r) for r in data.get("rows") or []],
            done=bool(data.get("done")),
            interrupted=bool(data.get("interrupted")),
            run_id=data.get("run_id"),
        )

    def same_sweep(self, other: SweepResult) -> bool:
        """Whether `other` (an earlier record) is this sweep, so --resume may continue it."""
        return (
            self.recipe == other.recipe
            and self.setting == other.setting
            and self.raws == other.raws
            and self.cluster_key == other.cluster_key
            and self.overrides == other.overrides
        )


def chart_points(result: SweepResult, figure: str, concurrency: int | None) -> list[float | None]:
    """The figure of each value in order (None: not measured), for a chart."""
    points: list[float | None] = []
    for i in range(len(result.raws)):
        row = result.row_for(i)
        if row is None or not row.measured or not row.levels:
            points.append(None)
            continue
        level = concurrency if concurrency is not None else max(row.levels)
        value = (row.levels.get(level) or {}).get(figure)
        points.append(value if value is not None and math.isfinite(value) else None)
    return points


def levels_for(levels: Levels) -> dict[int, dict[str, float | None]]:
    """A plain copy of a benchmark's levels (what a row keeps)."""
    return {int(k): dict(v) for k, v in levels.items()}

"""The run history as session actions, the same for the CLI and the cockpit: list the runs
(one row wording), show one with its comparison, compare two, export, pick or reset the
baseline; and the hooks that keep each rank's log tail when a launch fails or a cluster
is stopped.

Every comparison is `ops.compare.compare_runs` (the baseline's repeats widen the noise),
so `history compare`, the export's report, the cockpit and tuning give one verdict.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import InputError, SparkError
from spark_tui.core.link import GB, fmt_gbs, fmt_share
from spark_tui.core.wording import change_text
from spark_tui.service.events import LogLine, RankState, RankStateChanged

if TYPE_CHECKING:
    # The records are pydantic's models (a tenth of a second to load): loaded when a
    # history is opened, so a launch makes its containers without them.
    # The comparison and the export reach the benchmark's HTTP client and a stop's report
    # Docker: loaded when used, so a session starts without them.
    from spark_tui.core.recipe import Recipe
    from spark_tui.ops.cluster import StopReport
    from spark_tui.ops.compare import Comparison, FigureDelta
    from spark_tui.ops.history import History, Run

__all__ = [
    "Comparison",
    "FigureDelta",
    "History",
    "HistoryRow",
    "RankTails",
    "Run",
    "RunDetail",
    "RunHistory",
    "keep_stopped_logs",
]


def __getattr__(name: str) -> Any:
    # History and Run are this module's too, loaded when first asked for (see above).
    if name in ("History", "Run"):
        from spark_tui.ops import history

        return getattr(history, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


OUTCOME = {True: "ok", False: "FAILED", None: "-"}
# Lines of a rank's log a failed launch keeps (as many as a stop keeps).
LOG_TAIL = 200


@dataclass(frozen=True)
class HistoryRow:
    """One run as a list shows it, in the words both interfaces use."""

    id: str
    time: str  # "YYYY-MM-DD HH:MM:SS" (UTC)
    kind: str
    recipe: str
    change: str  # the settings that differ from the recipe's defaults
    outcome: str  # ok, FAILED or -
    summary: str
    simulated: bool = False
    logs: str | None = None  # the folder holding the kept rank logs

    @classmethod
    def of(cls, run: Run) -> HistoryRow:
        changed = ", ".join(f"{c['name']}={_plain(c['after'])}" for c in run.changed)
        summary = run.summary()
        if run.failure:
            summary = f"{summary}; {run.failure}" if summary else run.failure
        return cls(
            id=run.id,
            time=run.time[:19].replace("T", " "),
            kind=run.kind,
            recipe=(run.recipe or "-") + (" (simulated)" if run.simulated else ""),
            change=changed or "recipe defaults",
            outcome=OUTCOME[run.ok],
            summary=summary,
            simulated=run.simulated,
            logs=str(Path(run.rank_logs[0].path).parent) if run.rank_logs else None,
        )

    def line(self) -> str:
        """The row on one line (the CLI's list)."""
        text = (
            f"{self.id}  {self.kind:<6} {self.time}  {self.recipe:<22} {self.outcome:<6} "
            f"{self.summary}  [{self.change}]"
        )
        return text + (f"  logs: {self.logs}" if self.logs else "")

    def lines(self, width: int = 80) -> list[str]:
        """The row within `width` columns (the CLI's list on a terminal of 80): the run, its
        kind, recipe and outcome, then when, what it says and what it changed, wrapped
        between those parts under an indent."""
        whole = self.line()
        if len(whole) <= width:
            return [whole]
        out = [f"{self.id}  {self.kind:<6} {self.recipe:<22} {self.outcome}".rstrip()]
        parts = [self.time, self.summary, f"[{self.change}]"]
        if self.logs:
            parts.append(f"logs: {self.logs}")
        line = " "
        for part in (p for p in parts if p):
            if len(line) > 1 and len(line) + 2 + len(part) > width:
                out.append(line)
                line = " "
            line += " " + part if len(line) == 1 else "  " + part
        out.append(line)
        return out


def _plain(value: Any) -> str:
    return (
        "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


GIB = 1024**3


def link_lines(bench: dict[str, Any]) -> list[str]:
    """A recorded benchmark's link and memory figures, one line per interface and one for
    memory (none when they were not sampled)."""
    out = []
    for f in bench.get("link") or []:
        peaks = [
            None if f.get(k) is None else float(f[k]) * GB for k in ("rx_peak_gbs", "tx_peak_gbs")
        ]
        out.append(
            f"link {f.get('node')} {f.get('interface')}: peak rx {fmt_gbs(peaks[0])} "
            f"tx {fmt_gbs(peaks[1])} GB/s, {fmt_share(f.get('peak_share'))} of the link"
        )
    memory = [
        f"{m.get('node')} {m['min_available'] / GIB:.1f} GiB"
        for m in bench.get("memory") or []
        if m.get("min_available") is not None
    ]
    if memory:
        out.append("least free memory: " + ", ".join(memory))
    return out


@dataclass
class RunDetail:
    """One run in detail: what happened, why it failed, where its rank logs are, and (a
    benchmark) its comparison with the baseline picked for its recipe and cluster."""

    run: Run
    comparison: Comparison | None = None
    baseline_note: str | None = None

    def headline(self) -> str:
        run = self.run
        mark = " (simulated)" if run.simulated else ""
        return f"{run.id}: {run.kind} of {run.recipe}{mark} — {OUTCOME[run.ok]}, {run.summary()}"

    def lines(self) -> list[str]:
        """Everything below the headline, one line each."""
        run = self.run
        out = []
        if run.kind == "launch" and run.changed:
            out.append(
                "changed from the recipe's defaults: "
                + ", ".join(change_text(c["name"], c["before"], c["after"]) for c in run.changed)
            )
        if run.kind == "launch" and run.image_resolved:
            r = run.image_resolved
            out.append(
                f"image {r.get('image')} {r.get('digest')} (the newest nightly for "
                f"{r.get('requested')})"
            )
        if run.failure:
            out.append(f"failed: {run.failure}")
        if run.kind == "bench":
            out += link_lines(run.results.get("bench") or {})
        out += list(run.notes)
        for log in run.rank_logs:
            why = f" ({log.reason})" if log.reason else ""
            out.append(f"rank {log.rank} on {log.node}: log kept in {log.path}{why}")
        if self.baseline_note:
            out.append(self.baseline_note)
        return out

    def text(self) -> str:
        """The whole detail as plain text (the CLI's `history show`)."""
        parts = [self.headline(), *self.lines()]
        if self.comparison is not None:
            parts.append(self.comparison.to_text())
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        from spark_tui.ops.export import masked_dict

        return {
            "run": masked_dict(self.run),
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "baseline_note": self.baseline_note,
        }


class RunHistory:
    """The history actions over one store (the user's, or the demo's own)."""

    def __init__(self, store: History | None = None) -> None:
        if store is None:
            from spark_tui.ops.history import History

            store = History()
        self.store = store

    @classmethod
    def demo(cls) -> RunHistory:
        """The demo's store: apart from the user's, every run in it marked simulated."""
        from spark_tui.ops.history import History

        return cls(History.demo())

    @property
    def root(self) -> Path:
        return self.store.root

    def rows(self) -> list[HistoryRow]:
        """Every run, oldest first (failed ones too)."""
        return [HistoryRow.of(r) for r in self.store.list_runs()]

    def runs_json(self) -> list[dict[str, Any]]:
        """Every run as JSON-able data, secrets masked (`history --json`)."""
        from spark_tui.ops.export import masked_dict

        return [masked_dict(r) for r in self.store.list_runs()]

    def show(self, run_id: str) -> RunDetail:
        """The run in detail; a benchmark with its comparison against its picked baseline."""
        run = self.store.get_run(run_id)
        detail = RunDetail(run)
        if run.kind != "bench":
            return detail
        baseline = self.store.pinned_baseline(run.recipe, run.cluster_key)
        if baseline is None:
            detail.baseline_note = (
                "no baseline picked for this recipe on this cluster "
                "(`spark-tui history baseline RUN`, or b in the cockpit's history)"
            )
        elif baseline.id == run.id:
            detail.baseline_note = "this run is the baseline of its recipe on this cluster"
        else:
            from spark_tui.ops.compare import compare_runs

            detail.comparison = compare_runs(self.store, baseline, run)
        return detail

    def compare(self, baseline_id: str, run_id: str) -> Comparison:
        """Benchmark `run_id` against `baseline_id` (a launch stands for its last one)."""
        from spark_tui.ops.compare import compare_runs

        return compare_runs(
            self.store, self.store.bench_of(baseline_id), self.store.bench_of(run_id)
        )

    def export(self, run_ids: Sequence[str], out_dir: Path) -> list[Path]:
        """A launch script per launch involved and `report.md` in `out_dir`."""
        if not run_ids or len(run_ids) > 2:
            raise InputError(
                "export takes one or two run ids", "spark-tui history export A [B] --out DIR"
            )
        from spark_tui.ops.export import export_runs

        return export_runs(self.store, run_ids, out_dir)

    def pin_baseline(self, run_id: str) -> Run:
        """Make this benchmark (or a launch's last one) its recipe's baseline on its cluster."""
        return self.store.pin_baseline(run_id)

    def pin_message(self, run_id: str) -> str:
        """Pin, and say what happened (or why not) in one line."""
        try:
            run = self.pin_baseline(run_id)
        except SparkError as exc:
            return f"{exc.message} ({exc.remedy})"
        return f"{run.id} is now the baseline of {run.recipe} on {run.cluster_key}"

    def reset_baseline(self, recipe: str) -> list[str]:
        """Forget the recipe's picked baseline (on every cluster); returns the run ids."""
        return self.store.reset_baseline(recipe)


def recipe_defaults(recipe: Recipe) -> dict[str, Any]:
    """The recipe's settings with no override: what a launch's "changed" is measured from."""
    from spark_tui.core.overrides import apply_overrides

    return apply_overrides(recipe, {})


# -- keeping the rank logs ------------------------------------------------------------------


@dataclass
class RankTails:
    """The last lines of each rank's log as a launch streams them, and why a rank failed:
    kept in the history (`keep`) when the launch fails, since its containers go."""

    size: int = LOG_TAIL
    lines: dict[tuple[int, str], deque[str]] = field(default_factory=dict)
    reasons: dict[int, str] = field(default_factory=dict)

    def see(self, event: object) -> None:
        if isinstance(event, LogLine):
            key = (event.rank, event.node)
            if key not in self.lines:
                self.lines[key] = deque(maxlen=self.size)
            self.lines[key].append(event.text)
        elif isinstance(event, RankStateChanged) and event.state is RankState.FAILED:
            self.lines.setdefault((event.rank, event.node), deque(maxlen=self.size))
            if event.reason:
                self.reasons.setdefault(event.rank, event.reason)

    def keep(self, history: History, run: Run | None, why: str) -> None:
        """Each rank's tail into the run's record, the run failed with the reason of the
        rank that failed first (else `why`). Nothing is kept without a record."""
        if run is None:
            return
        first = next(iter(self.reasons), None)
        ranks = sorted(self.lines.items(), key=lambda kv: (kv[0][0] != first, kv[0]))
        try:
            for (rank, node), lines in ranks:
                reason = self.reasons.get(rank, why)
                history.keep_rank_logs(run.id, rank, node, lines, reason, failed=True)
            if not ranks:
                history.mark_failed(run.id, why)
        except (OSError, SparkError):
            return  # the launch's own error is what the user needs to see


def keep_stopped_logs(history: History, report: StopReport, reason: str = "stopped") -> None:
    """Each stopped rank's last lines into its cluster's launch record. A rank that had
    already ended with an error marks the run failed."""
    by_cluster: dict[str, list[Any]] = {}
    for tail in report.tails:
        by_cluster.setdefault(tail.cluster_id, []).append(tail)
    for cluster_id, tails in by_cluster.items():
        run = history.launch_of(cluster_id)
        if run is None:
            continue
        try:
            for t in tails:
                failed = t.exit_code not in (None, 0)
                why = f"exited with code {t.exit_code} before the stop" if failed else reason
                history.keep_rank_logs(run.id, t.rank, t.node, t.lines, why, failed=failed)
        except (OSError, SparkError):
            continue

"""Text the cockpit shows for the service's results: the setting editor's preview, the
history's rows and details, a tuning comparison. Rendering only: the work is the service's."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from spark_tui.core.errors import SparkError
from spark_tui.core.wording import depth_label

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.service.evaluate import Evaluation
    from spark_tui.service.events import BenchDone, Compared
    from spark_tui.service.history import Comparison, FigureDelta, RunHistory


def editable_settings(recipe: Recipe, sets: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """Keys to offer (tunable ones first) and their current values."""
    from spark_tui.core.overrides import apply_overrides, valid_keys
    from spark_tui.service.evaluate import TUNABLE

    current = apply_overrides(recipe, sets)
    keys = list(TUNABLE) + [k for k in valid_keys(recipe) if k not in TUNABLE]
    return keys, current


def preview_change(
    recipe: Recipe,
    sets: dict[str, str],
    key: str,
    value: str,
    evaluate: Callable[[Recipe, dict[str, str]], Evaluation],
    tune_key: str = "Enter",
) -> tuple[str | None, Text]:
    """Validate one change and preview the fit verdict it would give."""
    from spark_tui.core.overrides import apply_overrides, settings_diff

    try:
        before = apply_overrides(recipe, sets)
        after = apply_overrides(recipe, {**sets, key: value})
    except SparkError as exc:
        return f"{exc.message} ({exc.remedy})", Text()
    diff = settings_diff(before, after, recipe)
    result = evaluate(recipe, {**sets, key: value})
    text = Text()
    if not diff:
        text.append("no change from the current value\n", style="yellow")
    for name, (old, new) in diff.items():
        text.append(f"{name}: {old!r} → {new!r}\n", style="bold")
    if result.problem:
        return f"{result.problem.message}\n→ {result.problem.remedy}", text
    verdict = result.verdict or "unknown"
    style = {"fits": "green", "fits_with_warnings": "yellow"}.get(verdict, "red")
    text.append(f"fit: {verdict.replace('_', ' ')}", style=style)
    report = result.report
    if report and report.nodes and report.nodes[0].max_concurrency is not None:
        text.append(f"   max concurrency {report.nodes[0].max_concurrency:.1f}x", style="dim")
    for finding in (report.findings if report else [])[:3]:
        if finding.severity != "info":
            text.append(f"\n{finding.severity}: {finding.message}", style="dim")
    text.append(
        f"\n{tune_key} relaunches every rank with this change and compares with the baseline."
    )
    return None, text


def history_rows(history: RunHistory) -> list[dict[str, Any]]:
    """Every recorded run, newest first (failed ones too), as rows for the history screen."""
    return [vars(row) for row in reversed(history.rows())]


def describe_run(history: RunHistory, run_id: str) -> RenderableType:
    """One run in detail; a benchmark with its comparison against its picked baseline, in
    columns that fit 80 columns (the noise beside each verdict)."""
    try:
        detail = history.show(run_id)
    except SparkError as exc:
        return Text(f"{exc.message} ({exc.remedy})", style="red")
    text = Text(detail.headline() + "\n", style="bold")
    for line in detail.lines():
        style = "red" if line.startswith("failed:") else "dim"
        text.append(f"{line}\n", style=style)
    comparison = detail.comparison
    if comparison is None:
        return text
    text.append(f"{comparison.run_id} against baseline {comparison.baseline_id}\n", style="bold")
    text.append(f"changed: {comparison.changed_text()}\n")
    text.append(f"noise rule: {comparison.rule}\n", style="dim")
    for note in comparison.notes:
        text.append(f"note: {note}\n", style="yellow")
    return Group(text, comparison_table(comparison))


VERDICT_STYLE = {"better": "bold green", "worse": "bold red"}
# Short names, so a comparison's row fits in 80 columns.
SHORT_LABELS = {
    "ttft_p50_s": "TTFT p50",
    "ttft_p95_s": "TTFT p95",
    "itl_mean_s": "ITL mean",
    "itl_p50_s": "ITL p50",
    "itl_p95_s": "ITL p95",
    "tps_per_request_mean": "tok/s/req",
    "tps_per_request_p50": "tok/s/req p50",
    "total_output_tps": "tok/s",
    "requests_per_s": "req/s",
    "latency_p50_s": "latency p50",
    "goodput_rps": "goodput/s",
    "errors": "errors",
}


def figure_line(fig: FigureDelta) -> Text:
    """`c8 tok/s 711 → 780 +9.7% better (noise 5.0%)`: one figure of a comparison, its
    verdict with the noise it was judged against."""
    from spark_tui.service.bench import fmt_figure

    text = Text(f"{fig.level_label:<4} {SHORT_LABELS.get(fig.figure, fig.figure)} ", style="")
    text.append(f"{fmt_figure(fig.figure, fig.baseline)} → {fmt_figure(fig.figure, fig.value)} ")
    if fig.delta_pct is not None:
        text.append(f"{fig.delta_pct:+.1f}% ")
    text.append(fig.verdict, style=VERDICT_STYLE.get(fig.verdict, "dim"))
    if fig.noise_pct is not None:
        text.append(f" (noise {fig.noise_pct:.1f}%)", style="dim")
    return text


def comparison_table(comparison: Comparison) -> Table:
    """Every figure of a comparison in columns that fit 80 columns: level, figure, baseline,
    run, delta, the noise it was judged against, verdict."""
    from spark_tui.service.bench import fmt_figure

    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
    for name, justify in (
        ("level", "left"),
        ("figure", "left"),
        ("baseline", "right"),
        ("run", "right"),
        ("delta", "right"),
        ("noise", "right"),
        ("verdict", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for fig in comparison.figures:
        table.add_row(
            fig.level_label,
            SHORT_LABELS.get(fig.figure, fig.figure),
            fmt_figure(fig.figure, fig.baseline),
            fmt_figure(fig.figure, fig.value),
            "-" if fig.delta_pct is None else f"{fig.delta_pct:+.1f}%",
            "-" if fig.noise_pct is None else f"{fig.noise_pct:.1f}%",
            Text(fig.verdict, style=VERDICT_STYLE.get(fig.verdict, "dim")),
        )
    return table


def comparison_text(compared: Compared) -> Text:
    """The one changed setting, then each concurrency level's figures against the baseline,
    and the comparison's notes (other settings that differ, unlike benchmarks)."""
    comparison: Comparison = compared.comparison
    text = Text(f"vs baseline {compared.baseline_id}: {comparison.changed_text()}  ", style="bold")
    if compared.smoke_ok is not None:
        ok = compared.smoke_ok
        text.append("smoke ok" if ok else "smoke FAILED", style="green" if ok else "red")
    if compared.ranks_carrying:
        ranks = ", ".join(map(str, compared.ranks_carrying))
        text.append(f"  every rank carries the change ({ranks})", style="dim")
    for fig in comparison.figures:
        if fig.figure not in ("total_output_tps", "ttft_p50_s") or fig.delta_pct is None:
            continue
        text.append("\n")
        text.append_text(figure_line(fig))
    for note in compared.notes:
        text.append(f"\nnote: {note}", style="yellow")
    return text


def bench_view(done: BenchDone | None, compared: Compared | None) -> list[RenderableType]:
    """The last benchmark in full (every level's figures, the workload, each figure's
    confidence interval over repeats, the length checks) and the last comparison with the
    noise beside each verdict: what the results view shows, in 80 columns."""
    from spark_tui.service.bench import fmt_figure

    out: list[RenderableType] = []
    if done is None and compared is None:
        return [Text("no benchmark yet: press b to run one", style="dim")]
    if done is not None:
        result = done.result
        workload = result.config.workload
        head = Text(f"{result.model} at {result.base_url}", style="bold")
        head.append(f"\nworkload: {workload.summary()}", style="dim")
        if done.run_id:
            head.append(f"\nrecorded as run {done.run_id}", style="dim")
        if result.cancelled:
            head.append("\ncancelled: partial results", style="yellow")
        out.append(head)
        figures = [
            ("ttft_p50_s", "TTFT p50"),
            ("ttft_p95_s", "TTFT p95"),
            ("itl_mean_s", "ITL mean"),
            ("itl_p95_s", "ITL p95"),
            ("total_output_tps", "tok/s"),
            ("requests_per_s", "req/s"),
        ]
        if workload.goodput:
            figures.append(("goodput_rps", "goodput/s"))
        table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
        table.add_column("level", no_wrap=True)
        for _, label in figures:
            table.add_column(label, justify="right", no_wrap=True)
        table.add_column("err", justify="right", no_wrap=True)
        for lv in result.levels:
            depth = f"@{depth_label(lv.context_depth)}" if lv.context_depth else ""
            table.add_row(
                f"c{lv.concurrency}{depth}",
                *(fmt_figure(name, lv.figures.get(name)) for name, _ in figures),
                Text(str(lv.errors), style="bold red" if lv.errors else ""),
            )
        out.append(table)
        details = Text()
        for lv in result.levels:
            depth = f"@{depth_label(lv.context_depth)}" if lv.context_depth else ""
            label = f"c{lv.concurrency}{depth}"
            asked = lv.prompt_tokens_requested_mean
            served = lv.prompt_tokens_mean
            misses = lv.prompt_length_misses + lv.output_length_misses
            if asked is not None:
                details.append(
                    f"{label}: prompt {_tokens(asked)} tokens asked, {_tokens(served)} served; "
                    f"{misses} length misses\n",
                    style="bold red" if misses else "dim",
                )
            elif served is not None:
                details.append(f"{label}: prompt {_tokens(served)} tokens served\n", style="dim")
            for name, (low, high) in lv.ci95.items():
                if name in ("ttft_p50_s", "itl_mean_s", "total_output_tps", "goodput_rps"):
                    details.append(
                        f"{label}: {SHORT_LABELS.get(name, name)} 95% CI "
                        f"{fmt_figure(name, low)} to {fmt_figure(name, high)}\n",
                        style="dim",
                    )
        for note in result.notes:
            details.append(f"note: {note}\n", style="yellow")
        if details.plain:
            details.rstrip()
            out.append(details)
    if compared is not None:
        comparison: Comparison = compared.comparison
        head = Text(f"\n{comparison.run_id} against baseline {compared.baseline_id}", style="bold")
        head.append(f"\nchanged: {comparison.changed_text()}")
        head.append(f"\nnoise rule: {comparison.rule}", style="dim")
        for note in comparison.notes:
            head.append(f"\nnote: {note}", style="yellow")
        out.append(head)
        out.append(comparison_table(comparison))
    return out


def _tokens(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"

"""Text the cockpit shows for the service's results: the setting editor's preview, the
history's rows and details, a tuning comparison. Rendering only: the work is the service's."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text

from spark_tui.core.errors import SparkError

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.service.evaluate import Evaluation
    from spark_tui.service.events import Compared
    from spark_tui.service.history import Comparison, RunHistory


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


def describe_run(history: RunHistory, run_id: str) -> Text:
    """One run in detail; a benchmark with its comparison against its picked baseline."""
    try:
        detail = history.show(run_id)
    except SparkError as exc:
        return Text(f"{exc.message} ({exc.remedy})", style="red")
    text = Text(detail.headline() + "\n", style="bold")
    for line in detail.lines():
        style = "red" if line.startswith("failed:") else "dim"
        text.append(f"{line}\n", style=style)
    if detail.comparison is not None:
        text.append(detail.comparison.to_text())
    return text


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
        style = {"better": "green", "worse": "red"}.get(fig.verdict, "dim")
        unit = "tok/s" if fig.figure == "total_output_tps" else "s TTFT"
        text.append(f"\nc{fig.concurrency} {fig.baseline:.3g} → {fig.value:.3g} {unit} ")
        text.append(f"{fig.delta_pct:+.0f}% {fig.verdict}", style=style)
    for note in compared.notes:
        text.append(f"\nnote: {note}", style="yellow")
    return text

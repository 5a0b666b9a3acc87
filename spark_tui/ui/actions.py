"""The cockpit's glue to the domain and the run history: pure calls, no widgets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from spark_tui.core.errors import SparkError
from spark_tui.core.facts import NodeFacts
from spark_tui.core.plan import LaunchPlan
from spark_tui.core.recipe import Recipe

# Settings offered first in the editor: the ones the playbook says to tune.
TUNABLE = [
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "enable_prefix_caching",
    "tensor_parallel",
    "tool_call_parser",
    "reasoning_parser",
]


@dataclass
class Evaluation:
    """A recipe on the current nodes: settings, fit report, plan (or the problem)."""

    verdict: str | None = None
    report: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None
    settings_shown: dict[str, Any] = field(default_factory=dict)
    plan: LaunchPlan | None = None
    served_model: str | None = None


def load_recipes(warn: Callable[[str], None]) -> list[Recipe]:
    """Bundled and user recipes (a user recipe hides the bundled one of its name); a broken
    user recipe is reported, not fatal."""
    from spark_tui.core.errors import RecipeError
    from spark_tui.core.recipe_loader import list_recipes, shadowed

    errors: list[RecipeError] = []
    recipes = list_recipes(errors=errors)
    for exc in errors:
        warn(f"{exc.message} → {exc.remedy}")
    hidden = shadowed(recipes)
    return [r for r in recipes if (r.name, r.source) not in hidden]


def evaluate(recipe: Recipe, sets: dict[str, str], nodes: list[NodeFacts]) -> Evaluation:
    """Apply overrides, render, check fit and build the plan; never raises."""
    from spark_tui.core.fit import check_fit
    from spark_tui.core.model_facts import resolve_model_facts
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.plan import build_plan
    from spark_tui.core.render import render_argv, render_env
    from spark_tui.core.serve_args import parse_serve_args

    out = Evaluation()
    try:
        settings = apply_overrides(recipe, sets)
        argv = render_argv(recipe, settings)
        env = render_env(recipe)
        args = parse_serve_args(argv)
        out.served_model = _served_name(args.served_model_name) or recipe.model
        out.settings_shown = {**{k: v for k, v in settings.items() if k in TUNABLE}, **sets}
        if not nodes:
            return out
        facts = resolve_model_facts(recipe, nodes)
        report = check_fit(recipe, argv, env, nodes, facts)
        out.report = report.to_dict()
        out.verdict = out.report["verdict"]
        out.plan = build_plan(recipe, settings, nodes)
    except SparkError as exc:
        out.problem = f"{exc.message}\n→ {exc.remedy}"
    return out


def _served_name(value: Any) -> str | None:
    if isinstance(value, list | tuple):
        return str(value[0]) if value else None
    return str(value) if value else None


def editable_settings(recipe: Recipe, sets: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """Keys to offer (tunable ones first) and their current values."""
    from spark_tui.core.overrides import apply_overrides, valid_keys

    current = apply_overrides(recipe, sets)
    keys = TUNABLE + [k for k in valid_keys(recipe) if k not in TUNABLE]
    return keys, current


def preview_change(
    recipe: Recipe, sets: dict[str, str], key: str, value: str, nodes: list[NodeFacts]
) -> tuple[str | None, Text]:
    """Validate one change and preview the fit verdict it would give."""
    from spark_tui.core.overrides import apply_overrides, settings_diff

    try:
        before = apply_overrides(recipe, sets)
        after = apply_overrides(recipe, {**sets, key: value})
    except SparkError as exc:
        return f"{exc.message} ({exc.remedy})", Text()
    diff = settings_diff(before, after, recipe)
    result = evaluate(recipe, {**sets, key: value}, nodes)
    text = Text()
    if not diff:
        text.append("no change from the current value\n", style="yellow")
    for name, (old, new) in diff.items():
        text.append(f"{name}: {old!r} → {new!r}\n", style="bold")
    if result.problem:
        return result.problem, text
    verdict = result.verdict or "unknown"
    style = {"fits": "green", "fits_with_warnings": "yellow"}.get(verdict, "red")
    text.append(f"fit: {verdict.replace('_', ' ')}", style=style)
    for node in result.report.get("nodes", [])[:1]:
        conc = node.get("max_concurrency")
        if conc is not None:
            text.append(f"   max concurrency {conc:.1f}x", style="dim")
    for finding in result.report.get("findings", [])[:3]:
        if finding["severity"] != "info":
            text.append(f"\n{finding['severity']}: {finding['message']}", style="dim")
    text.append("\nEnter relaunches every rank with this change and compares with the baseline.")
    return None, text


# ------------------------------------------------------------------ history
def _history() -> Any:
    from spark_tui.ops import history

    return history


def record_launch(plan: LaunchPlan, recipe: Recipe, sets: dict[str, str]) -> str | None:
    try:
        run = _history().record_launch(plan.to_dict(), overrides=sets)
    except SparkError:
        return None
    return str(getattr(run, "id", run))


def record_smoke(cluster_id: str, recipe: str, sets: dict[str, str], results: list[Any]) -> None:
    try:
        _history().record_smoke(
            results, recipe=recipe, cluster_id=cluster_id, overrides=sets
        )
    except SparkError:
        pass  # history is best effort: the results are on screen


def record_bench(cluster_id: str, recipe: str, sets: dict[str, str], result: dict[str, Any]) -> None:
    try:
        _history().record_bench(result, recipe=recipe, cluster_id=cluster_id, overrides=sets)
    except SparkError:
        pass  # history is best effort: the results are on screen


def history_rows() -> list[dict[str, Any]]:
    rows = []
    for run in _history().list_runs():
        data = run.to_dict() if hasattr(run, "to_dict") else dict(run)
        overrides = data.get("overrides") or {}
        rows.append(
            {
                "id": data.get("id"),
                "time": data.get("time") or data.get("created"),
                "kind": data.get("kind"),
                "recipe": data.get("recipe"),
                "change": ", ".join(f"{k}={v}" for k, v in overrides.items()) or "baseline",
                "summary": data.get("summary") or "",
            }
        )
    return rows


def describe_run(run_id: str) -> Text:
    history = _history()
    run = history.get_run(run_id)
    data = run.to_dict() if hasattr(run, "to_dict") else dict(run)
    text = Text(f"{run_id}: {data.get('kind')} of {data.get('recipe')}\n", style="bold")
    baseline = history.baseline_for(data.get("recipe"), data.get("cluster_key"))
    if baseline is not None and getattr(baseline, "id", None) != run_id and data.get("kind") == "bench":
        comparison = history.compare(baseline, run)
        text.append(str(comparison.to_text() if hasattr(comparison, "to_text") else comparison))
    else:
        text.append("this run is the baseline of its recipe on this cluster", style="dim")
    return text


def comparison_text(
    baseline: dict[str, Any],
    after: dict[str, Any],
    key: str,
    old: Any,
    new: Any,
    smoke: list[dict[str, Any]] | None,
) -> Text:
    """Figure by figure, the change against the baseline at each concurrency level."""
    text = Text(f"{key}: {old if old is not None else 'recipe default'} → {new}  ", style="bold")
    if smoke is not None:
        ok = all(r.get("ok") for r in smoke)
        text.append("smoke ok" if ok else "smoke FAILED", style="green" if ok else "red")
    before_levels = {lv["concurrency"]: lv for lv in baseline.get("levels", [])}
    for lv in after.get("levels", []):
        base = before_levels.get(lv["concurrency"])
        if not base:
            continue
        b, a = base.get("output_tps_total") or 0.0, lv.get("output_tps_total") or 0.0
        delta = (a - b) / b * 100 if b else 0.0
        noise = max(base.get("noise_pct") or 0.0, lv.get("noise_pct") or 0.0, 5.0)
        style = "green" if delta > noise else "red" if delta < -noise else "dim"
        text.append(f"\nc{lv['concurrency']}: {b:.0f} → {a:.0f} tok/s ")
        text.append(f"{delta:+.0f}%", style=style)
        text.append(" (beyond noise)" if abs(delta) > noise else " (within noise)", style="dim")
    return text

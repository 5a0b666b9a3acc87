"""The cockpit's glue to the domain and the run history: pure calls, no widgets."""

from __future__ import annotations

import os
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
    return [r for r in recipes if (r.name, r.origin) not in hidden]


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
        token = bool(os.environ.get("HF_TOKEN"))
        report = check_fit(recipe, argv, env, nodes, facts, hf_token_set=token)
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
    """Record a launch (secrets masked by the history); its id, or None if it failed."""
    try:
        run = _history().record_launch(plan, overrides=sets, ok=True)
    except (SparkError, OSError):
        return None
    return str(run.id)


def record_smoke(
    cluster_id: str, recipe: str, sets: dict[str, str], results: list[Any], base_url: str | None
) -> Any:
    try:
        return _history().record_smoke(
            results, recipe=recipe, cluster_id=cluster_id, overrides=sets, base_url=base_url
        )
    except (SparkError, OSError):
        return None  # history is best effort: the results are on screen


def record_bench(cluster_id: str, recipe: str, sets: dict[str, str], result: dict[str, Any]) -> Any:
    try:
        return _history().record_bench(result, recipe=recipe, cluster_id=cluster_id, overrides=sets)
    except (SparkError, OSError):
        return None  # history is best effort: the results are on screen


def history_rows() -> list[dict[str, Any]]:
    """Every recorded run, newest first, as rows for the history screen."""
    rows = []
    for run in reversed(_history().list_runs()):
        changed = ", ".join(f"{c['name']}={c['after']}" for c in run.changed)
        overrides = ", ".join(f"{k}={v}" for k, v in run.overrides.items())
        rows.append(
            {
                "id": run.id,
                "time": run.time,
                "kind": run.kind,
                "recipe": run.recipe or "",
                "change": changed or overrides or "recipe defaults",
                "summary": run.summary(),
            }
        )
    return rows


def describe_run(run_id: str) -> Text:
    """One run in detail; a benchmark with its comparison against the baseline."""
    history = _history()
    try:
        run = history.get_run(run_id)
    except SparkError as exc:
        return Text(f"{exc.message} ({exc.remedy})", style="red")
    text = Text(f"{run.id}: {run.kind} of {run.recipe} — {run.summary()}\n", style="bold")
    if run.kind != "bench":
        for note in run.notes:
            text.append(f"{note}\n", style="dim")
        return text
    baseline = history.baseline_for(run.recipe, run.cluster_key)
    if baseline is None or baseline.id == run.id:
        text.append("this run is the baseline of its recipe on this cluster", style="dim")
        return text
    text.append(history.compare(baseline, run).to_text())
    return text


def baseline_run(before: Any) -> Any:
    """The baseline to compare with: the first benchmark of the recipe on this cluster
    (the playbook's measured baseline), else the run measured just before the change."""
    if before is None:
        return None
    first = _history().baseline_for(before.recipe, before.cluster_key)
    return first if first is not None else before


def comparison_text(baseline_run: Any, after_run: Any, smoke: list[dict[str, Any]] | None) -> Text:
    """The one changed setting, then each concurrency level's figures against the baseline."""
    comparison = _history().compare(baseline_run, after_run)
    text = Text(f"vs baseline {baseline_run.id}: {comparison.changed_text()}  ", style="bold")
    if smoke is not None:
        ok = all(r.get("ok") for r in smoke)
        text.append("smoke ok" if ok else "smoke FAILED", style="green" if ok else "red")
    for fig in comparison.figures:
        if fig.figure not in ("total_output_tps", "ttft_p50_s") or fig.delta_pct is None:
            continue
        style = {"better": "green", "worse": "red"}.get(fig.verdict, "dim")
        unit = "tok/s" if fig.figure == "total_output_tps" else "s TTFT"
        text.append(f"\nc{fig.concurrency} {fig.baseline:.3g} → {fig.value:.3g} {unit} ")
        text.append(f"{fig.delta_pct:+.0f}% {fig.verdict}", style=style)
    return text

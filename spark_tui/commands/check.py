"""`spark-tui check RECIPE (--facts FILE | --inventory FILE | --hosts ...) [--set K=V]...
[--json]`: does the recipe fit these nodes?

Exit codes: 0 fits (with or without warnings); 1 does not fit, or unknown (a fact the check
needs is missing: the findings name it); 2 bad input; 3 a node could not be reached.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Mapping

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.core.facts import GIB, NodeFacts
from spark_tui.core.fit import Finding, FitReport, NodeFit
from spark_tui.core.recipe import Recipe

_VERDICT_TEXT = {
    "fits": "fits",
    "fits_with_warnings": "fits, with warnings",
    "does_not_fit": "does not fit",
    "unknown": "unknown (facts missing)",
}


def exit_code(report: FitReport) -> int:
    """0 when the verdict lets a launch go ahead, else 1."""
    return EXIT_OK if report.ok else EXIT_FAILED


def plural(n: object, noun: str) -> str:
    """`1 rank`, `2 ranks` (`? ranks` when unknown)."""
    from spark_tui.core.wording import plural as counted

    return counted(n, noun) if isinstance(n, int) else f"? {noun}s"


def _g(value: int | None) -> str:
    return "-" if value is None else f"{value / GIB:.1f}"


def _row(fit: NodeFit) -> list[str]:
    conc = "-" if fit.max_concurrency is None else f"{fit.max_concurrency:.2f}x"
    tokens = "-" if fit.kv_tokens is None else f"{fit.kv_tokens:,}"
    return [
        fit.name,
        _g(fit.memory_total_bytes),
        _g(fit.budget_bytes),
        _g(fit.weights_bytes),
        _g(fit.overhead_bytes),
        _g(fit.kv_budget_bytes),
        _g(fit.kv_per_request_bytes),
        tokens,
        conc,
        _g(fit.headroom_bytes),
    ]


_HEADER = [
    "node",
    "memory",
    "budget",
    "weights",
    "runtime",
    "KV",
    "KV/req",
    "KV tokens",
    "max conc",
    "headroom",
]


def render_report(
    report: FitReport, recipe_name: str, model: str, sources: dict[str, str] | None = None
) -> str:
    """The human report: verdict, per-node memory table (GiB), where the model facts came
    from, findings with remedies."""
    p = report.parallel
    lines = [
        f"check     {recipe_name}  ({model})",
        f"verdict   {_VERDICT_TEXT.get(report.verdict, report.verdict)}",
        f"layout    TP {p.get('tensor_parallel')} x PP {p.get('pipeline_parallel')} x "
        f"DP {p.get('data_parallel')} = {plural(p.get('world_size'), 'rank')} on "
        f"{plural(p.get('nodes'), 'node')}"
        + (f"   max_model_len {report.max_model_len}" if report.max_model_len else ""),
        "",
    ]
    rows = [_HEADER] + [_row(n) for n in report.nodes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("(GiB; KV/req = KV cache one request at max_model_len needs)")
    if sources:
        lines.append("")
        lines.append("model facts from")
        lines.extend(_sources_lines(sources))
    if report.findings:
        lines.append("")
        lines.append("findings")
        for f in report.findings:
            lines.append(f"  {f.severity:<7} {f.code}: {f.message}")
            lines.append(f"          remedy: {f.remedy}")
    return "\n".join(lines)


def held_by_running(nodes: list[NodeFacts]) -> dict[str, int]:
    """Memory our running containers hold per node: a launch replaces them, so the check
    counts it as available (vLLM's default budget, at most what is in use)."""
    from spark_tui.core.plan import LABEL_PREFIX
    from spark_tui.service.evaluate import DEFAULT_GPU_MEMORY_UTILIZATION, held_by_ours

    return {
        n.name: held_by_ours(n, DEFAULT_GPU_MEMORY_UTILIZATION)
        for n in nodes
        if any(c.state == "running" and LABEL_PREFIX + "cluster" in c.labels for c in n.containers)
    }


def _check_image_flags(
    args: argparse.Namespace, report: FitReport, recipe: Recipe, argv: list[str], head: str
) -> None:
    """Add the findings of the head image's own `vllm serve` flag table (see ops.image_flags)."""
    from spark_tui.commands.terminal import targets
    from spark_tui.core.fit import verdict_of
    from spark_tui.ops.image_flags import check_image_flags_sync
    from spark_tui.service.targets import inventory_nodes

    t = targets(args)
    inv = inventory_nodes(t)
    mods = [step.mod for step in recipe.prelaunch if step.mod]
    found = check_image_flags_sync(
        inv, head, recipe.container or "", argv, mods, accept_new_host_keys=t.accept_new_host_keys
    )
    report.findings.extend(found)
    if any(f.severity == "error" for f in found):
        report.verdict = verdict_of(report.findings, report.missing)


def run(args: argparse.Namespace) -> int:
    """Load the recipe, apply --set, find the nodes, check the fit, print the report."""
    from spark_tui.commands.terminal import run_lazily, targets
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.remote.hub import model_facts_for
    from spark_tui.service.evaluate import evaluate
    from spark_tui.service.targets import node_facts

    recipe = find_recipe(args.recipe)
    nodes = node_facts(targets(args), run=run_lazily)
    result = evaluate(
        recipe, list(args.sets), nodes, held=held_by_running(nodes), facts_for=model_facts_for
    )
    # A plan that cannot be built is the answer only when the fit check has none of its own
    # (e.g. too few nodes for a layout whose heads do not divide: the fit says both).
    if result.problem is not None and (result.report is None or result.report.ok):
        raise result.problem
    assert result.report is not None and result.model_facts is not None
    sources = result.model_facts.sources
    gaps = _presence(args, recipe, result.argv, result.env, nodes)
    if gaps:
        from spark_tui.core.fit import verdict_of

        # A gap is a warning (vLLM fetches the model there) or, offline, an error: the
        # verdict and the exit status follow it, as they follow the fit's own findings.
        result.report.findings += gaps
        result.report.verdict = verdict_of(result.report.findings, result.report.missing)
    if not getattr(args, "facts", None) and recipe.container and nodes:
        _check_image_flags(args, result.report, recipe, result.argv, nodes[0].name)
    if args.json:
        doc = result.report.to_dict()
        doc["facts_sources"] = dict(sorted(sources.items()))
        print(json.dumps(doc, indent=2))
    else:
        print(render_report(result.report, recipe.name, recipe.model, sources))
        if result.credited:
            held = ", ".join(f"{k} {v / GIB:.1f} GiB" for k, v in result.credited.items())
            print(f"(counted as available: memory our running cluster holds: {held})")
    return exit_code(result.report)


def _presence(
    args: argparse.Namespace,
    recipe: Recipe,
    argv: list[str],
    env: Mapping[str, str],
    nodes: list[NodeFacts],
) -> list[Finding]:
    """The model (and draft) and the image on every node: one finding per gap, naming the
    sync command for these nodes (the same findings the cockpit's fit panel shows)."""
    from spark_tui.service.sync import gap_findings

    if getattr(args, "inventory", None):
        where = f"--inventory {shlex.quote(str(args.inventory))}"
    elif getattr(args, "hosts", None):
        where = f"--hosts {shlex.quote(str(args.hosts))}"
    else:
        where = "--inventory FILE"
    return gap_findings(recipe, argv, env, nodes, where=where)


def _sources_lines(sources: dict[str, str]) -> list[str]:
    """One line per origin, naming the facts it gave."""
    by_origin: dict[str, list[str]] = {}
    for key, origin in sorted(sources.items()):
        by_origin.setdefault(origin, []).append(key)
    return [f"  {origin}: {', '.join(keys)}" for origin, keys in sorted(by_origin.items())]

"""`spark-tui check RECIPE (--facts FILE | --inventory FILE | --hosts ...) [--set K=V]...
[--json]`: does the recipe fit these nodes?

Exit codes: 0 fits (with or without warnings); 1 does not fit, or unknown (a fact the check
needs is missing: the findings name it); 2 bad input; 3 a node could not be reached.
"""

from __future__ import annotations

import argparse
import json
import os

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.core.facts import GIB
from spark_tui.core.fit import FitReport, NodeFit, check_fit

EXIT_HELP = (
    "exit status: 0 fits (also with warnings); 1 does not fit, or unknown because a needed "
    "fact is missing (the findings name it); 2 bad input; 3 a node could not be reached"
)

_VERDICT_TEXT = {
    "fits": "fits",
    "fits_with_warnings": "fits, with warnings",
    "does_not_fit": "does not fit",
    "unknown": "unknown (facts missing)",
}


def exit_code(report: FitReport) -> int:
    """0 when the verdict lets a launch go ahead, else 1."""
    return EXIT_OK if report.ok else EXIT_FAILED


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
        f"DP {p.get('data_parallel')} = {p.get('world_size')} ranks on {p.get('nodes')} node(s)"
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


def _check_image_flags(
    args: argparse.Namespace, report: FitReport, image: str, argv: list[str], head: str
) -> None:
    """Add the findings of the head image's own `vllm serve` flag table (see ops.image_flags)."""
    from spark_tui.core.fit import verdict_of
    from spark_tui.core.inventory import hosts_to_inventory, parse_inventory
    from spark_tui.ops.image_flags import check_image_flags_sync

    if getattr(args, "inventory", None):
        with open(args.inventory, encoding="utf-8") as f:
            inv = parse_inventory(f.read(), source=str(args.inventory))
    else:
        inv = hosts_to_inventory(str(args.hosts))
    accept = bool(getattr(args, "accept_new_host_keys", False))
    found = check_image_flags_sync(inv, head, image, argv, accept_new_host_keys=accept)
    report.findings.extend(found)
    if any(f.severity == "error" for f in found):
        report.verdict = verdict_of(report.findings, report.missing)


def run(args: argparse.Namespace) -> int:
    """Load the recipe, apply --set, find the nodes, check the fit, print the report."""
    from spark_tui.commands.plan import target_nodes
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.core.render import render_argv, render_env

    recipe = find_recipe(args.recipe)
    settings = apply_overrides(recipe, list(getattr(args, "sets", None) or []))
    argv = render_argv(recipe, settings)
    env = render_env(recipe)
    nodes = target_nodes(args)
    from spark_tui.remote.hub import model_facts_for

    facts, hub_finding = model_facts_for(recipe, nodes, argv)
    report = check_fit(
        recipe, argv, env, nodes, facts, hf_token_set=bool(os.environ.get("HF_TOKEN"))
    )
    if hub_finding is not None:
        report.findings.append(hub_finding)
    if not getattr(args, "facts", None) and recipe.container and nodes:
        _check_image_flags(args, report, recipe.container, argv, nodes[0].name)
    if getattr(args, "json", False):
        doc = report.to_dict()
        doc["facts_sources"] = dict(sorted(facts.sources.items()))
        print(json.dumps(doc, indent=2))
    else:
        print(render_report(report, recipe.name, recipe.model, facts.sources))
    return exit_code(report)


def _sources_lines(sources: dict[str, str]) -> list[str]:
    """One line per origin, naming the facts it gave."""
    by_origin: dict[str, list[str]] = {}
    for key, origin in sorted(sources.items()):
        by_origin.setdefault(origin, []).append(key)
    return [f"  {origin}: {', '.join(keys)}" for origin, keys in sorted(by_origin.items())]

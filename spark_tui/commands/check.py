"""`spark-tui check RECIPE (--facts FILE | --inventory FILE | --hosts ...) [--set K=V]...
[--json]`: does the recipe fit these nodes?

Exit codes: 0 fits (with or without warnings); 1 does not fit, or unknown (a fact the check
needs is missing: the findings name it); 2 bad input; 3 a node could not be reached.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from spark_tui.commands.terminal import with_nodes
from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.core.facts import GIB
from spark_tui.core.fit import Finding, FitReport, NodeFit

if TYPE_CHECKING:
    from spark_tui.core.plan import LaunchPlan
    from spark_tui.service.evaluate import Evaluation

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
    "conc",
    "headroom",
]
# The table stays within an 80-column terminal: one space between columns when two would not.
WIDTH = 80


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
    gap = "  " if sum(widths) + 2 * (len(widths) - 1) <= WIDTH else " "
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append(gap.join(cells).rstrip())
        if i == 0:
            lines.append(gap.join("-" * w for w in widths))
    lines.append("(GiB; KV/req = KV cache one request at max_model_len needs;")
    lines.append(" conc = how many such requests it holds at once)")
    if sources:
        lines.append("")
        lines.append("model facts from")
        lines.extend(_sources_lines(sources))
    if report.findings:
        lines.append("")
        lines.append("findings")
        for f in report.findings:
            lines.append(f"  {f.severity:<7} {f.code}: {f.message}")
            lines.append(f"          remedy: {with_nodes(f.remedy)}")
    return "\n".join(lines)


def _flag_check(args: argparse.Namespace) -> Callable[[LaunchPlan], list[Finding]] | None:
    """The image's flag check of every rank's argv, over a short-lived connection to the
    head (none from a facts file: no node to ask)."""
    if getattr(args, "facts", None):
        return None
    from spark_tui.commands.terminal import targets
    from spark_tui.service.image_flags import plan_flags_now
    from spark_tui.service.targets import inventory_nodes

    t = targets(args)
    return lambda plan: plan_flags_now(
        inventory_nodes(t), plan, accept_new_host_keys=t.accept_new_host_keys
    )


def assessed(args: argparse.Namespace, *, complete: bool = True) -> Evaluation:
    """The verdict the cockpit and `launch` give for the recipe, --set and nodes of `args`:
    model facts from the nodes' caches and the Hub, a sentinel image resolved to the newest
    nightly, our running clusters' memory counted free, each node's gaps, the image's flag
    check. Not `complete`: neither the Hub nor the image's flags are asked (for a plan,
    which does not depend on them)."""
    from functools import partial

    from spark_tui.commands.terminal import err, run_lazily, targets
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.service.evaluate import FactsFor, assess, held_memory
    from spark_tui.service.images import resolve_now
    from spark_tui.service.model_facts import hub_facts_for, local_facts_for
    from spark_tui.service.targets import node_facts

    recipe = find_recipe(args.recipe)
    t = targets(args)
    nodes, unpicked = node_facts(t, run=run_lazily)
    facts_for: FactsFor = local_facts_for
    if complete:
        # The user's own command, for the remedies that say "run it again".
        words = ["check", str(args.recipe)] + [w for s in args.sets for w in ("--set", s)]
        words += ["--on", t.on] if t.on is not None else []
        facts_for = partial(hub_facts_for, waiting=err, again=t.command(*words))
    return assess(
        recipe,
        list(args.sets),
        nodes,
        held=held_memory(nodes),
        facts_for=facts_for,
        where=t.as_flags(live=True),
        flags=_flag_check(args) if complete else None,
        images=resolve_now,
        unpicked=unpicked,
    )


def run(args: argparse.Namespace) -> int:
    """Load the recipe, apply --set, find the nodes, check the fit, print the report."""
    result = assessed(args)
    # A plan that cannot be built is the answer only when the fit check has none of its own
    # (e.g. too few nodes for a layout whose heads do not divide: the fit says both).
    if result.problem is not None and (result.report is None or result.report.ok):
        raise result.problem
    assert result.report is not None and result.model_facts is not None
    recipe = result.recipe
    sources = result.model_facts.sources
    if args.json:
        doc = result.report.to_dict()
        doc["facts_sources"] = dict(sorted(sources.items()))
        print(json.dumps(doc, indent=2))
    else:
        print(render_report(result.report, recipe.name, recipe.model, sources))
        if result.credited:
            held = ", ".join(f"{k} {v / GIB:.1f} GiB" for k, v in result.credited.items())
            print(f"(counted as available: memory of our cluster this launch replaces: {held})")
    return exit_code(result.report)


def _sources_lines(sources: dict[str, str]) -> list[str]:
    """One line per origin, naming the facts it gave."""
    by_origin: dict[str, list[str]] = {}
    for key, origin in sorted(sources.items()):
        by_origin.setdefault(origin, []).append(key)
    return [f"  {origin}: {', '.join(keys)}" for origin, keys in sorted(by_origin.items())]

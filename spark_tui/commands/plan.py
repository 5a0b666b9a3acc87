"""`spark-tui plan RECIPE (--facts FILE | --inventory FILE | --hosts ...) [--set K=V]...
[--shell | --json]`: print the launch plan without starting anything."""

from __future__ import annotations

import argparse
import json

from spark_tui.core.plan import LaunchPlan, is_secret_name
from spark_tui.core.shell import argv_lines
from spark_tui.core.wording import plural


def _masked(key: str, value: str) -> str:
    if is_secret_name(key) and not value.startswith("${"):
        return "${" + key + "}"
    return value


def summary(plan: LaunchPlan) -> str:
    """The human summary: per rank its node, address, role, container, image, argv, env."""
    lines = [
        f"plan      {plan.recipe}  ({plan.model})",
        f"cluster   {plan.cluster_id}   settings {plan.settings_hash}   runtime {plan.runtime}",
        f"layout    TP {plan.tensor_parallel} x PP {plan.pipeline_parallel} x "
        f"DP {plan.data_parallel} = {plural(len(plan.ranks), 'node')}",
        f"nodes     {', '.join(r.node for r in plan.ranks)}"
        + (f"   left out: {', '.join(plan.nodes_left_out)}" if plan.nodes_left_out else ""),
        f"endpoint  {plan.endpoint['base_url']}  (on {plan.endpoint['node']})",
        "rendezvous " + "  ".join(f"{k}={v}" for k, v in plan.rendezvous.items()),
    ]
    if plan.image_resolved is not None:
        r = plan.image_resolved
        lines.append(f"image     {r.image}  {r.digest}  (the newest nightly for {r.requested})")
    for rank in plan.ranks:
        c = rank.container
        lines += [
            "",
            f"rank {rank.rank}  {rank.node}  {rank.address} (cluster link {rank.cluster_address})"
            f"  {rank.role}",
            f"  container {c.name}",
            f"  image     {c.image}",
        ]
        if plan.image_resolved is not None:
            lines.append(f"  digest    {plan.image_resolved.digest}")
        if rank.prelaunch:
            # What runs in the container before the serve command, in order.
            lines.append("  before serve")
            for step in rank.prelaunch:
                if step.kind == "copy":
                    lines.append(f"    copy {step.source} -> {step.dest}")
                else:
                    lines.append(f"    run  {step.command}")
        lines.append("  argv")
        lines += [f"    {line}" for line in argv_lines(rank.argv)]
        lines.append("  env")
        for key, value in rank.env.items():
            shown = _masked(key, value)
            tag = "   (read from your shell at launch)" if shown.startswith("${") else ""
            lines.append(f"    {key}={shown}{tag}")
        lines.append("  mounts")
        lines += [f"    {host} -> {target}" for host, target in c.mounts.items()]
    if plan.serve_exec:
        lines += ["", f"serve on {plan.head.node} once the Ray cluster has formed"]
        lines += [f"    {line}" for line in argv_lines(plan.serve_exec)]
    if plan.notes:
        lines.append("")
        lines += [f"note: {note}" for note in plan.notes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the plan: a summary, the per-node shell commands, or JSON."""
    from spark_tui.commands.check import assessed

    # The plan a launch of the same recipe on the same nodes would run.
    result = assessed(args, complete=False)
    if result.problem is not None:
        raise result.problem
    plan = result.plan
    assert plan is not None
    if result.verdict == "does_not_fit":
        # The plan is shown (to read or run by hand), but not as if it would start: said on
        # stderr, so --shell and --json stay what they are.
        import shlex
        import sys

        argv = getattr(args, "argv", None) or ["plan", args.recipe]
        check = ["check", *(a for a in argv[1:] if a not in ("--shell", "--json"))]
        print(
            "spark-tui: the fit check says this does not fit (`spark-tui launch` refuses it); "
            f"`spark-tui {shlex.join(check)}` says why and what to change",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
    elif args.shell:
        print(plan.to_shell(), end="")
    else:
        print(summary(plan))
    return 0

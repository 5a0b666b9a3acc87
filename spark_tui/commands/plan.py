"""`spark-tui plan RECIPE (--facts FILE | --inventory FILE | --hosts ...) [--set K=V]...
[--shell | --json]`: print the launch plan without starting anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spark_tui.core.errors import FactsError, InputError
from spark_tui.core.facts import NodeFacts, parse_facts
from spark_tui.core.plan import LaunchPlan, build_plan, is_secret_name
from spark_tui.core.shell import argv_lines


def load_facts_file(path: str) -> list[NodeFacts]:
    """Nodes from a facts file (what `probe --json` printed), head first."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FactsError(
            f"facts file {path!r} does not exist",
            "write one with `spark-tui probe --inventory FILE --json > facts.json`",
        ) from None
    except OSError as exc:
        raise FactsError(
            f"cannot read facts file {path!r}: {exc.strerror}", "check the path"
        ) from None
    return parse_facts(text, source=str(path))


def target_nodes(args: argparse.Namespace) -> list[NodeFacts]:
    """The nodes named on the command line: a facts file offline, else a live probe."""
    if getattr(args, "facts", None):
        return load_facts_file(args.facts)
    inventory = getattr(args, "inventory", None)
    hosts = getattr(args, "hosts", None)
    if not inventory and not hosts:
        raise InputError(
            "no nodes given",
            "pass --facts FILE (offline), --inventory FILE or --hosts spark-a,spark-b",
        )
    from spark_tui.core.inventory import hosts_to_inventory, parse_inventory

    if inventory:
        try:
            text = Path(inventory).expanduser().read_text(encoding="utf-8")
        except OSError:
            raise FactsError(
                f"cannot read inventory file {inventory!r}",
                "check the path; an inventory is YAML: nodes: [{name, host}, ...]",
            ) from None
        inv = parse_inventory(text, source=str(inventory))
    else:
        inv = hosts_to_inventory(str(hosts))
    # Imported only here: the offline path loads neither asyncio nor asyncssh.
    from spark_tui.commands._interrupts import run_command
    from spark_tui.remote.probe import probe_nodes

    accept = bool(args.accept_new_host_keys)
    return list(run_command(lambda: probe_nodes(inv, accept_new_host_keys=accept)))


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
        f"DP {plan.data_parallel} = {len(plan.ranks)} node(s)",
        f"endpoint  {plan.endpoint['base_url']}  (on {plan.endpoint['node']})",
        "rendezvous " + "  ".join(f"{k}={v}" for k, v in plan.rendezvous.items()),
    ]
    for rank in plan.ranks:
        c = rank.container
        lines += [
            "",
            f"rank {rank.rank}  {rank.node}  {rank.address} (cluster link {rank.cluster_address})"
            f"  {rank.role}",
            f"  container {c.name}",
            f"  image     {c.image}",
        ]
        if rank.prelaunch:
            # What runs in the container before the serve command, in order.
            lines.append("  before serve")
            for step in rank.prelaunch:
                if step.kind == "copy":
                    lines.append(f"    copy {step.source} -> {step.dest}")
                else:
                    lines.append(f"    run  {step.command}")
        lines += [
            "  argv",
        ]
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


def make_plan(args: argparse.Namespace) -> LaunchPlan:
    """Recipe + overrides + nodes -> the launch plan (shared by other subcommands)."""
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.recipe_loader import find_recipe

    recipe = find_recipe(args.recipe)
    settings = apply_overrides(recipe, list(getattr(args, "sets", None) or []))
    nodes = target_nodes(args)
    return build_plan(recipe, settings, nodes)


def run(args: argparse.Namespace) -> int:
    """Print the plan: a summary, the per-node shell commands, or JSON."""
    plan = make_plan(args)
    if getattr(args, "json", False):
        print(json.dumps(plan.to_dict(), indent=2))
    elif getattr(args, "shell", False):
        print(plan.to_shell(), end="")
    else:
        print(summary(plan))
    return 0

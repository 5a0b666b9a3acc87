"""The one recipe pipeline: recipe -> overrides -> render -> fit -> plan.

`check`, `plan`, `launch`, the cockpit's recipe list, fit panel and setting editor all go
through `evaluate`. It is pure (no I/O beyond the recipe files `find_recipe` reads) and
imports neither asyncssh nor the Docker SDK, so the offline commands stay fast.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_tui.core.errors import SparkError
from spark_tui.core.facts import ModelFacts, NodeFacts
from spark_tui.core.fit import Finding, FitReport
from spark_tui.core.images import ResolvedImage
from spark_tui.core.plan import LaunchPlan
from spark_tui.core.recipe import Recipe

# Settings offered first in the editor and shown in the recipe details: the ones the
# playbook says to tune.
TUNABLE = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "enable_prefix_caching",
    "tensor_parallel",
    "tool_call_parser",
    "reasoning_parser",
)
# (recipe, nodes, argv) -> the model facts, and a finding about where they came from.
FactsFor = Callable[[Recipe, list[NodeFacts], list[str]], tuple[ModelFacts, Finding | None]]
# What vLLM budgets when a command does not say (--gpu-memory-utilization's default).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


@dataclass
class Evaluation:
    """A recipe with overrides on some nodes: settings, argv, fit report and plan.

    `problem` holds the error (message and remedy) when the recipe or an override is
    invalid; the other fields are then as far as the pipeline got.
    """

    recipe: Recipe
    overrides: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    served_model: str | None = None
    report: FitReport | None = None
    plan: LaunchPlan | None = None
    problem: SparkError | None = None
    model_facts: ModelFacts | None = None
    # Memory (bytes per node) our own running cluster holds and that this evaluation
    # counted as available, because launching replaces that cluster.
    credited: dict[str, int] = field(default_factory=dict)

    @property
    def verdict(self) -> str | None:
        return self.report.verdict if self.report is not None else None

    @property
    def settings_shown(self) -> dict[str, Any]:
        """The tunable settings and the user's overrides; a removed setting reads "none"
        (as it is typed: `--set tool_call_parser=none`), never Python's None."""
        shown = {k: v for k, v in self.settings.items() if k in TUNABLE}
        shown.update(self.settings_overridden)
        return {k: ("none" if v is None else v) for k, v in shown.items()}

    @property
    def settings_overridden(self) -> dict[str, Any]:
        """The overridden settings with their typed values."""
        return {k: self.settings.get(k, v) for k, v in self.overrides.items()}

    def needs_insisting(self) -> bool:
        """The fit check says no (or cannot say): launching needs the user's yes."""
        return self.verdict in ("does_not_fit", "unknown")


def load_recipes(warn: Callable[[str], None]) -> list[Recipe]:
    """Bundled and user recipes (a user recipe hides the bundled one of its name); a broken
    user recipe is reported through `warn`, not fatal."""
    from spark_tui.core.errors import RecipeError
    from spark_tui.core.recipe_loader import list_recipes, shadowed

    errors: list[RecipeError] = []
    recipes = list_recipes(errors=errors)
    for exc in errors:
        warn(f"{exc.message} → {exc.remedy}")
    hidden = shadowed(recipes)
    return [r for r in recipes if (r.listed_name, r.origin) not in hidden]


def parse_sets(sets: Sequence[str]) -> dict[str, str]:
    """`--set K=V` items as a mapping (the last one of a key wins)."""
    from spark_tui.core.overrides import parse_set

    return dict(parse_set(item) for item in sets)


def running_overrides(recipe: Recipe, argv: Sequence[str]) -> dict[str, str]:
    """The tunable settings a running head's `vllm serve` argv gives other values than the
    recipe's own: the overrides it was launched with, read back from what runs (for a
    cluster whose launch this machine did not record)."""
    from spark_tui.core import settings_schema as schema
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.render import flag_value, render_argv, switch_value

    try:
        own = render_argv(recipe, apply_overrides(recipe, {}))
    except SparkError:
        return {}
    words = [str(w) for w in argv]
    out: dict[str, str] = {}
    for key in TUNABLE:
        setting = schema.get(key)
        if setting is None:
            continue
        if setting.kind == "bool":
            now, was = switch_value(words, setting), switch_value(own, setting)
            if now is not None and now != was:
                out[key] = "true" if now else "false"
            continue
        spellings = schema.flag_spellings(setting)
        value = flag_value(words, *spellings)
        if value is not None and value != flag_value(own, *spellings):
            out[key] = value
    try:
        apply_overrides(recipe, out)
    except SparkError:
        return {}  # what runs is not this recipe's to say (edited since the launch)
    return out


def gpu_memory_utilization(argv: Sequence[str]) -> float:
    """The memory share a `vllm serve` argv budgets (vLLM's default when it does not say)."""
    from spark_tui.core.render import flag_value

    value = flag_value(list(argv), "--gpu-memory-utilization")
    try:
        return float(value) if value is not None else DEFAULT_GPU_MEMORY_UTILIZATION
    except ValueError:
        return DEFAULT_GPU_MEMORY_UTILIZATION


def held_by_ours(node: NodeFacts, utilization: float) -> int:
    """Memory a running rank of ours holds on `node`: its budget, at most what is in use."""
    total = node.memory_total_bytes
    if total is None or node.memory_available_bytes is None:
        return 0
    used = max(0, total - node.memory_available_bytes)
    return min(used, int(total * utilization))


def container_utilization(command: str | None) -> float:
    """The memory share a container of ours budgets, read from its command as Docker lists
    it (vLLM's default when it does not say, e.g. a Ray head's `ray start`)."""
    import re

    found = re.search(r"--gpu-memory-utilization[= ]+'?([0-9.]+)", command or "")
    try:
        return float(found.group(1)) if found else DEFAULT_GPU_MEMORY_UTILIZATION
    except ValueError:
        return DEFAULT_GPU_MEMORY_UTILIZATION


def held_memory(
    nodes: Sequence[NodeFacts],
    known: Mapping[str, tuple[Sequence[str], float]] | None = None,
) -> dict[str, int]:
    """Memory our running clusters hold per node, which a launch replacing them gets back.

    Each cluster counts once per node, with its own budget: the clusters the probe saw
    running (their containers' commands say the budget) and `known` ones (cluster id ->
    its nodes and budget, e.g. the one a session launched after the last probe); at most
    what is in use."""
    from spark_tui.core.plan import LABEL_PREFIX

    label = LABEL_PREFIX + "cluster"
    out = {}
    for node in nodes:
        shares: dict[str, float] = {}
        for c in node.containers:
            if c.state == "running" and label in c.labels:
                share = container_utilization(c.command)
                shares[c.labels[label]] = max(shares.get(c.labels[label], 0.0), share)
        for cluster_id, (on, share) in (known or {}).items():
            if node.name in on:
                shares[cluster_id] = share
        if shares:
            out[node.name] = held_by_ours(node, min(1.0, sum(shares.values())))
    return out


def clusters_beside(
    plan: LaunchPlan,
    nodes: Sequence[NodeFacts],
    known: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """Plan notes on our other running clusters: one on the plan's nodes is replaced (a
    launch stops it first, asked; its memory counted free), one on other nodes runs on
    beside it (its memory stays held). `known`: cluster id -> its nodes, e.g. the one a
    session launched after the last probe."""
    from spark_tui.core.plan import LABEL_PREFIX

    label = LABEL_PREFIX + "cluster"
    on: dict[str, list[str]] = {}
    for node in nodes:
        for c in node.containers:
            cid = c.labels.get(label)
            if c.state == "running" and cid and node.name not in on.get(cid, []):
                on.setdefault(cid, []).append(node.name)
    for cid, names in (known or {}).items():
        on.setdefault(cid, [])
        on[cid] += [n for n in names if n not in on[cid]]
    used = {r.node for r in plan.ranks}
    notes = []
    for cid, names in sorted(on.items()):
        where = ", ".join(names)
        if used & set(names):
            notes.append(
                f"replaces cluster {cid} of ours on {where}: a launch stops it first "
                "(asked; --replace says yes), so its memory is counted free"
            )
        else:
            notes.append(
                f"cluster {cid} of ours runs on beside it on {where} (its memory stays held)"
            )
    return notes


def credit_memory(nodes: Sequence[NodeFacts], held: Mapping[str, int]) -> list[NodeFacts]:
    """The nodes as a launch that replaces our running cluster will find them."""
    out = []
    for node in nodes:
        extra = held.get(node.name, 0)
        if extra and node.memory_available_bytes is not None:
            free = node.memory_available_bytes + extra
            if node.memory_total_bytes is not None:
                free = min(free, node.memory_total_bytes)
            node = dataclasses.replace(node, memory_available_bytes=free)
        out.append(node)
    return out


def evaluate(
    recipe: Recipe,
    overrides: Mapping[str, Any] | Sequence[str],
    nodes: Sequence[NodeFacts],
    *,
    held: Mapping[str, int] | None = None,
    hf_token_set: bool | None = None,
    cluster_id: str | None = None,
    facts_for: FactsFor | None = None,
    image: ResolvedImage | None = None,
    unpicked: Sequence[str] | None = None,
) -> Evaluation:
    """Apply the overrides, render the command, check the fit and build the plan.

    Never raises a SparkError: an invalid recipe or override is the evaluation's
    `problem`. With no nodes, it stops after rendering. `held`: memory per node that our
    running cluster holds and a launch would get back (see `held_by_ours`).
    `hf_token_set`: whether HF_TOKEN reaches the containers (default: this environment's).
    `facts_for(recipe, nodes, argv)`: the model facts and a finding about them (e.g. the
    Hub's, for `check`); default: the recipe's metadata and the nodes' caches.
    `image`: the recipe's sentinel image resolved (the plan's ranks run that tag).
    `unpicked`: the user picked `nodes` out of more and left these out (None: no pick;
    see core.selection); the fit and the plan name them.
    """
    from spark_tui.core.fit import check_fit
    from spark_tui.core.model_facts import resolve_model_facts
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.plan import build_plan
    from spark_tui.core.render import render_argv, render_env
    from spark_tui.core.serve_args import parse_serve_args

    out = Evaluation(recipe)
    try:
        sets = parse_sets(overrides) if _is_list(overrides) else dict(overrides)  # type: ignore[arg-type]
        out.overrides = sets
        out.settings = apply_overrides(recipe, sets)
        out.argv = render_argv(recipe, out.settings)
        out.env = render_env(recipe)
        out.served_model = _served_name(parse_serve_args(out.argv).served_model_name)
        out.served_model = out.served_model or recipe.model
        if not nodes:
            return out
        seen = list(nodes)
        if held:
            seen = credit_memory(seen, held)
            out.credited = {k: v for k, v in held.items() if v}
        token = bool(os.environ.get("HF_TOKEN")) if hf_token_set is None else hf_token_set
        finding = None
        if facts_for is not None:
            facts, finding = facts_for(recipe, seen, out.argv)
        else:
            facts = resolve_model_facts(recipe, seen)
        out.model_facts = facts
        out.report = check_fit(
            recipe, out.argv, out.env, seen, facts, hf_token_set=token, unpicked=unpicked
        )
        if finding is not None:
            out.report.findings.append(finding)
        out.plan = build_plan(recipe, out.settings, seen, cluster_id, unpicked=unpicked)
        # Only the plan's nodes get memory back (the clusters of ours on them are
        # replaced); a service on other nodes goes on holding its own.
        used = {r.node for r in out.plan.ranks}
        out.credited = {k: v for k, v in out.credited.items() if k in used}
        if image is not None:
            from spark_tui.core.images import pin_image

            pin_image(out.plan, image)
    except SparkError as exc:
        out.problem = exc
    return out


def assess(
    recipe: Recipe,
    overrides: Mapping[str, Any] | Sequence[str],
    nodes: Sequence[NodeFacts],
    *,
    held: Mapping[str, int],
    facts_for: FactsFor,
    where: str = "--inventory FILE",
    remedy: str | None = None,
    flags: Callable[[LaunchPlan], Sequence[Finding] | None] | None = None,
    images: Callable[[str], ResolvedImage | Finding | None] | None = None,
    unpicked: Sequence[str] | None = None,
) -> Evaluation:
    """The verdict `check`, `plan`, the cockpit and `launch` all give: `evaluate` (with the
    recipe's sentinel image resolved by `images(image)`: the tag and digest, or the finding
    that says why not), then a finding per node that lacks the model, the draft model or
    the image, or holds another digest of it (their remedies name the sync for the nodes
    `where` names, or `remedy`), then the image's flag check of every rank's argv
    (`flags(plan)`: its findings, None when not made yet). `unpicked`: see `evaluate`."""
    from spark_tui.service.gaps import gap_findings

    answer = images(recipe.container) if images is not None and recipe.container else None
    resolved = answer if isinstance(answer, ResolvedImage) else None
    out = evaluate(
        recipe,
        overrides,
        nodes,
        held=held,
        facts_for=facts_for,
        image=resolved,
        unpicked=unpicked,
    )
    if isinstance(answer, Finding) and out.plan is not None:
        out.plan.notes.append(f"{answer.message} → {answer.remedy}")
    if out.plan is not None:
        out.plan.notes.extend(clusters_beside(out.plan, nodes))
    if out.report is None:
        return out
    if isinstance(answer, Finding):
        add_findings(out, [answer])
    add_findings(
        out, gap_findings(recipe, out.argv, out.env, nodes, remedy, where=where, image=resolved)
    )
    if flags is not None and out.plan is not None:
        add_findings(out, flags(out.plan) or [])
    return out


def add_findings(evaluation: Evaluation, findings: Sequence[Finding]) -> None:
    """Findings made after the pipeline (e.g. the image's flag check) join the report, and
    the verdict follows them."""
    from spark_tui.core.fit import verdict_of

    report = evaluation.report
    if report is None or not findings:
        return
    report.findings.extend(f for f in findings if f not in report.findings)
    report.verdict = verdict_of(report.findings, report.missing)


def _is_list(value: object) -> bool:
    return isinstance(value, list | tuple)


def _served_name(value: Any) -> str | None:
    if isinstance(value, list | tuple):
        return str(value[0]) if value else None
    return str(value) if value else None

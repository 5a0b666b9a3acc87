"""Is the recipe's model (and its draft model) on every node, complete, at one revision?

Pure: it reads what the probe found in each node's Hugging Face cache (`CachedModel.files`,
the sizes of the snapshot's files whose content is there) and says, per node, what is
missing, and what a copy from a complete node has to send (`files_to_copy`). The reference
for "complete" is the Hub's file list when known, else the most complete node's snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spark_tui.core.facts import GIB, CachedModel, NodeFacts
from spark_tui.core.fit import Finding
from spark_tui.core.recipe import Recipe
from spark_tui.core.serve_args import parse_serve_args


@dataclass(frozen=True)
class ModelNeed:
    """A model the recipe serves: `role` is "model" or "draft" (a speculative model)."""

    role: str
    repo_id: str
    revision: str | None = None
    load_format: str | None = None  # the command's --load-format (None: vLLM's auto)


@dataclass
class NodePresence:
    """One node's copy of one model: which revision, what is there, what is missing."""

    node: str
    revision: str | None
    present_bytes: int = 0
    missing: list[str] = field(default_factory=list)  # files absent or of the wrong size
    missing_bytes: int | None = 0  # None: the size of what is missing is not known
    found: bool = True  # whether the node has the model at that revision at all

    @property
    def complete(self) -> bool:
        return self.found and not self.missing


@dataclass
class ModelPresence:
    """Every node's copy of one model, against one reference file list."""

    need: ModelNeed
    revision: str | None  # the revision every node should have
    reference: dict[str, int]  # file -> size of a complete snapshot ({} when unknown)
    source: str | None  # the node whose snapshot is the reference (None: the Hub's list)
    nodes: list[NodePresence] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(self.reference.values())


def _looks_like_repo(name: str) -> bool:
    return "/" in name and not name.startswith(("/", ".", "~")) and name.count("/") == 1


def model_needs(recipe: Recipe, argv: Sequence[str] | None = None) -> list[ModelNeed]:
    """The model and, when `speculative_config` names one, the draft model, in that order.

    `argv` is the rendered serve command (where `--speculative-config` lives); a draft
    named by a local path is not a Hub model and is left out.
    """
    if not argv:
        return [ModelNeed("model", recipe.model, recipe.model_revision)]
    args = parse_serve_args(list(argv))
    fmt = args.flags.get("--load-format")
    needs = [ModelNeed("model", recipe.model, recipe.model_revision, fmt)]
    spec = args.speculative_config or {}
    draft = spec.get("model")
    if isinstance(draft, str) and _looks_like_repo(draft) and draft != recipe.model:
        revision = spec.get("revision")
        needs.append(
            ModelNeed("draft", draft, revision if isinstance(revision, str) else None, fmt)
        )
    return needs


def _same_revision(have: str | None, want: str) -> bool:
    return bool(have) and (have == want or (len(want) >= 7 and str(have).startswith(want)))


def _copies(node: NodeFacts, repo_id: str) -> list[CachedModel]:
    return [m for m in node.models if m.repo_id == repo_id]


def _file_count(model: CachedModel) -> int:
    return sum((model.files or {}).values())


def _pick(node: NodeFacts, need: ModelNeed, revision: str | None) -> CachedModel | None:
    copies = _copies(node, need.repo_id)
    if revision:
        copies = [m for m in copies if _same_revision(m.revision, revision)]
    return max(copies, key=_file_count, default=None)


def presence(
    need: ModelNeed,
    nodes: Sequence[NodeFacts],
    hub_files: Mapping[str, int] | None = None,
    hub_revision: str | None = None,
) -> ModelPresence:
    """Each node's copy of `need` against the reference file list.

    The revision is the recipe's pin, else the Hub's, else the head's (the first node with a
    copy). The reference is `hub_files` when given, else the snapshot with the most bytes at
    that revision.
    """
    revision = need.revision or hub_revision
    if revision is None:
        for node in nodes:
            found = _pick(node, need, None)
            if found is not None and found.revision:
                revision = found.revision
                break
    reference: dict[str, int] = dict(hub_files or {})
    source: str | None = None
    if not reference:
        best: tuple[int, str, dict[str, int]] | None = None
        for node in nodes:
            found = _pick(node, need, revision)
            if found is None or not found.files:
                continue
            if best is None or _file_count(found) > best[0]:
                best = (_file_count(found), node.name, dict(found.files))
        if best is not None:
            source, reference = best[1], best[2]
    result = ModelPresence(need, revision, reference, source)
    for node in nodes:
        result.nodes.append(_node_presence(node, need, revision, reference))
    return result


def _node_presence(
    node: NodeFacts, need: ModelNeed, revision: str | None, reference: Mapping[str, int]
) -> NodePresence:
    found = _pick(node, need, revision)
    if found is None:
        return NodePresence(
            node.name,
            None,
            missing=sorted(reference) or ["(every file)"],
            missing_bytes=sum(reference.values()) if reference else None,
            found=False,
        )
    files = found.files
    expected = dict(reference)
    for shard in found.shards or []:  # what its own index names must be there too
        expected.setdefault(shard, -1)
    if files is None:  # an older facts file: only whether the revision is there is known
        return NodePresence(node.name, found.revision, present_bytes=found.size_bytes or 0)
    missing = [name for name, size in sorted(expected.items()) if files.get(name) not in (size,)]
    missing = [n for n in missing if not (expected[n] == -1 and n in files)]
    unknown = any(expected[n] == -1 for n in missing)
    missing_bytes = None if unknown else sum(expected[n] - files.get(n, 0) for n in missing)
    return NodePresence(
        node.name,
        found.revision,
        present_bytes=sum(files.values()),
        missing=missing,
        missing_bytes=missing_bytes,
    )


def _gib(value: int) -> str:
    return f"{value / GIB:.1f} GiB"


def sync_remedy(recipe_name: str, where: str = "--inventory FILE") -> str:
    """The command that fixes a model gap (named in every finding's remedy)."""
    return (
        f"run `spark-tui models sync {recipe_name} {where}` (downloads once, copies node to node)"
    )


def presence_findings(
    recipe_name: str,
    results: Sequence[ModelPresence],
    nodes: Sequence[NodeFacts],
    *,
    offline: bool = False,
    where: str = "--inventory FILE",
) -> list[Finding]:
    """One finding per gap: a node without the model, at another revision, with files
    missing or cut short, or without the disk for what it lacks.

    Missing files are a warning (vLLM would download them on that node by itself), an
    error when the nodes are offline (vLLM would stop) or the disk is too small.
    """
    remedy = sync_remedy(recipe_name, where)
    by_name = {n.name: n for n in nodes}
    out: list[Finding] = []
    for res in results:
        label = res.need.repo_id + (" (draft model)" if res.need.role == "draft" else "")
        at = f" at {res.revision[:12]}" if res.revision else ""
        severity = "error" if offline else "warning"
        for node in res.nodes:
            if node.complete:
                continue
            facts = by_name.get(node.node)
            if not node.found:
                others = [m.revision for m in _copies(facts, res.need.repo_id)] if facts else []
                if others and res.revision:
                    msg = (
                        f"{node.node} has {label} only at {', '.join(str(r)[:12] for r in others)}"
                        f", not{at}"
                    )
                    code = "model_revision_differs"
                else:
                    msg = f"{node.node} has no copy of {label}{at} in its Hugging Face cache"
                    code = "model_missing_on_node"
            else:
                shown = ", ".join(node.missing[:3]) + (" ..." if len(node.missing) > 3 else "")
                msg = (
                    f"{node.node} has {label}{at} incomplete: {len(node.missing)} file(s) "
                    f"missing or cut short ({shown})"
                )
                code = "model_incomplete"
            if node.missing_bytes:
                msg += f"; {_gib(node.missing_bytes)} to fetch"
            out.append(Finding(severity, code, msg, remedy))
            free = facts.disk_free_bytes if facts else None
            if node.missing_bytes and free is not None and free < node.missing_bytes:
                out.append(
                    Finding(
                        "error",
                        "model_no_disk",
                        f"{node.node} has {_gib(free)} free where its Hugging Face cache is, "
                        f"{label} needs {_gib(node.missing_bytes)} more",
                        f"free disk on {node.node} (`hf cache delete`, or remove old snapshots "
                        f"under ~/.cache/huggingface/hub), then {remedy.removeprefix('run ')}",
                    )
                )
    return out


@dataclass(frozen=True)
class FileCopy:
    """One file a copy sends: from byte `offset` (what the destination already has) on."""

    path: str
    size: int
    offset: int = 0

    @property
    def remaining(self) -> int:
        return self.size - self.offset


def files_to_copy(
    source: Mapping[str, int], dest: Mapping[str, int], partial: Mapping[str, int] | None = None
) -> list[FileCopy]:
    """What to send so `dest` matches `source`: complete files are skipped; a partial file
    no longer than the source's resumes where it stopped; anything else starts over."""
    partial = partial or {}
    out = []
    for path, size in sorted(source.items()):
        if dest.get(path) == size:
            continue
        have = partial.get(path, 0)
        out.append(FileCopy(path, size, have if 0 < have <= size else 0))
    return out

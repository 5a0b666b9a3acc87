"""The gaps a sync fixes, as fit findings: each node that lacks the recipe's model, its
draft model or its image (`gap_findings`), for `check`, `plan`, `launch` and the fit panel.

Apart from the syncs themselves (service.sync), which bring the operations' events and
asyncio: the headless `check` and `plan` only need these findings.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.fit import Finding
    from spark_tui.core.images import ResolvedImage
    from spark_tui.core.recipe import Recipe

# The codes of the findings a model sync or an image sync fixes.
MODEL_GAPS = ("model_missing_on_node", "model_revision_differs", "model_incomplete")
IMAGE_GAPS = ("image_missing_on_node", "image_differs")


def resolved_image_findings(
    resolved: ResolvedImage, nodes: Sequence[NodeFacts], remedy: str
) -> list[Finding]:
    """A warning per node that lacks the resolved nightly or holds another digest under its
    tag: the launch pulls it there, and refuses to start if the digests still differ."""
    from spark_tui.core.fit import Finding

    out = []
    for node in nodes:
        if not node.images:
            continue  # the probe listed no images: nothing to say
        have = next((i for i in node.images if i.ref == resolved.image), None)
        if have is None:
            message = f"{node.name} does not have {resolved.image} (the launch pulls it)"
            out.append(Finding("warning", IMAGE_GAPS[0], message, remedy))
        elif have.digest != resolved.digest:
            theirs = (have.digest or "no digest").removeprefix("sha256:")[:12]
            message = (
                f"{node.name} has another {resolved.image} ({theirs}, the registry's is "
                f"{resolved.short_digest}): the launch pulls it again"
            )
            out.append(Finding("warning", IMAGE_GAPS[1], message, remedy))
    return out


def image_findings(image: str, nodes: Sequence[NodeFacts], remedy: str) -> list[Finding]:
    """A warning per node that lacks the head's image or has another build of it (the
    probe's images; nothing is said when the probe did not list images)."""
    from spark_tui.core.fit import Finding

    def found(node: NodeFacts) -> str | None:
        for img in node.images:
            if img.ref == image or image in (img.id, img.digest):
                return img.id or img.digest or img.ref
        return None

    listed = [n for n in nodes if n.images]
    if not listed:
        return []
    ids = {n.name: found(n) for n in listed}
    ref = next((i for i in ids.values() if i), None)
    out = []
    for name, have in ids.items():
        if have is None:
            out.append(Finding("warning", IMAGE_GAPS[0], f"{name} does not have {image}", remedy))
        elif ref is not None and have != ref:
            out.append(
                Finding(
                    "warning",
                    IMAGE_GAPS[1],
                    f"{name} has another {image} ({have.removeprefix('sha256:')[:12]}, the "
                    f"first node's is {ref.removeprefix('sha256:')[:12]})",
                    remedy,
                )
            )
    return out


def gap_findings(
    recipe: Recipe,
    argv: Sequence[str],
    env: Mapping[str, str],
    nodes: Sequence[NodeFacts],
    remedy: str | None = None,
    where: str = "--inventory FILE",
    image: ResolvedImage | None = None,
) -> list[Finding]:
    """Each node that lacks the model, the draft model or the image (`image`: the recipe's
    sentinel resolved, whose digest every node must hold). The remedies name the
    CLI's sync commands for the nodes `where` names, or `remedy` (how another interface
    runs the sync). Offline (HF_HUB_OFFLINE in the recipe's env or here) a missing model is
    an error: vLLM would stop instead of downloading it."""
    import os

    from spark_tui.core.model_presence import model_needs, presence, presence_findings

    if not nodes:
        return []
    flag = {**env, **os.environ}.get("HF_HUB_OFFLINE", "")
    offline = str(flag).lower() in ("1", "true", "yes")
    results = [presence(need, nodes) for need in model_needs(recipe, list(argv))]
    out = []
    for f in presence_findings(recipe.name, results, nodes, offline=offline, where=where):
        if remedy is not None and f.code in MODEL_GAPS:
            f = dataclasses.replace(f, remedy=remedy)
        out.append(f)
    if recipe.container:
        image_remedy = remedy or f"spark-tui images sync {shlex.quote(recipe.name)} {where}"
        if image is not None:
            out += resolved_image_findings(image, nodes, image_remedy)
        else:
            out += image_findings(recipe.container, nodes, image_remedy)
    return out

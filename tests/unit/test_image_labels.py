"""A resolved sentinel travels with the plan: its ranks run the dated tag, and their labels
say what it was asked for as and its digest (what `status` reads back from a running rank)."""

from __future__ import annotations

from spark_tui.core.facts import Interface, NodeFacts
from spark_tui.core.images import (
    ResolvedImage,
    image_line,
    is_sentinel,
    parse_ref,
    pin_image,
    running_image,
)
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe_loader import find_recipe

RESOLVED = ResolvedImage(
    "eugr/spark-vllm:latest",
    "ghcr.io/spark-arena/dgx-vllm-eugr-nightly:2026-12-02",
    "2026-12-02",
    "sha256:" + "ab" * 32,
)


def _nodes() -> list[NodeFacts]:
    return [
        NodeFacts(
            name=f"spark-{c}",
            address=f"10.0.0.{i}",
            memory_total_bytes=128 * 1024**3,
            interfaces=[Interface(f"enp{i}s0", f"rocep{i}", "up", f"192.168.100.{i}", 200000)],
        )
        for i, c in ((1, "a"), (2, "b"))
    ]


def test_a_pinned_plan_runs_the_tag_and_labels_say_what_it_stands_for() -> None:
    recipe = find_recipe("glm-5.3-flash")
    plan = build_plan(recipe, apply_overrides(recipe, {}), _nodes())
    pin_image(plan, RESOLVED)
    assert {r.container.image for r in plan.ranks} == {RESOLVED.image}
    assert plan.to_dict()["image_resolved"] == RESOLVED.to_dict()
    head = plan.head.container
    assert running_image(head.image, head.labels) == RESOLVED
    assert image_line(head.image, head.labels) == (
        f"{RESOLVED.image}  {RESOLVED.digest}  (the newest nightly for eugr/spark-vllm:latest)"
    )
    # A container of an image used as written says just its image.
    assert image_line("nvcr.io/nvidia/vllm:26.05", {}) == "nvcr.io/nvidia/vllm:26.05"


def test_references_split_as_docker_reads_them() -> None:
    assert parse_ref("eugr/spark-vllm:latest").name == "eugr/spark-vllm"
    assert parse_ref("eugr/spark-vllm:latest").repository == "eugr/spark-vllm"
    assert parse_ref("vllm:1").repository == "library/vllm"
    ref = parse_ref("localhost:5000/a/b:c@sha256:00")
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        "localhost:5000",
        "a/b",
        "c",
        "sha256:00",
    )
    assert is_sentinel(" ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest ")
    assert not is_sentinel("ghcr.io/spark-arena/dgx-vllm-eugr-nightly:2026-12-02")

"""Helpers shared by the ops tests: recognisable secrets, two Sparks, the glm plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spark_tui.core.facts import Interface, NodeFacts

# Recognisable so a test can grep every written file for it.
FAKE_HF_TOKEN = "hf_TESTSECRET_0123456789abcdef"
FAKE_API_KEY = "sk-TESTAPIKEY-9876543210"


def two_nodes() -> list[NodeFacts]:
    """Two 128 GB Sparks whose ConnectX names differ (as in the playbook)."""
    return [
        NodeFacts(
            name="spark-a",
            address="10.0.0.1",
            home="/home/a",
            memory_total_bytes=128 * 1024**3,
            interfaces=[Interface("enp1s0f1np1", "rocep1s0f1", "up", "192.168.100.10", 200000)],
        ),
        NodeFacts(
            name="spark-b",
            address="10.0.0.2",
            home="/home/b",
            memory_total_bytes=128 * 1024**3,
            interfaces=[Interface("enP2p1s0f1np1", "roceP2p1s0f1", "up", "192.168.100.11", 200000)],
        ),
    ]


def glm_plan(overrides: dict[str, Any] | None = None) -> Any:
    """The glm-5.3-flash LaunchPlan for two nodes, through the real recipe and plan code."""
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.plan import build_plan
    from spark_tui.core.recipe_loader import find_recipe

    recipe = find_recipe("glm-5.3-flash")
    return build_plan(recipe, apply_overrides(recipe, overrides or {}), two_nodes())


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under root whose bytes contain needle."""
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]

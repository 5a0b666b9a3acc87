"""Counts and settings in the domain's text read as a person writes them."""

from __future__ import annotations

from spark_tui.core.facts import GIB, Interface, NodeFacts
from spark_tui.core.fit import check_fit
from spark_tui.core.model_facts import facts_from_metadata
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import Recipe
from spark_tui.core.wording import change_text, plural, setting_text


def _node(i: int) -> NodeFacts:
    return NodeFacts(
        name=f"spark-{i}",
        address=f"10.0.0.{i + 1}",
        memory_total_bytes=128 * GIB,
        memory_available_bytes=120 * GIB,
        interfaces=[Interface("enp1s0f0np0", "rocep1s0f0", "up", f"192.168.50.{i + 1}", 200000)],
    )


RECIPE = Recipe(name="r", model="org/m", container="img:1", command="vllm serve {model}")


def test_one_rank_and_one_node_are_singular() -> None:
    plan = build_plan(RECIPE, {}, [_node(0), _node(1)])
    assert "1 node, runtime" in plan.to_shell()
    assert "(the first 1 node given); left out: spark-1" in " ".join(plan.notes)
    facts = facts_from_metadata("org/m", {"num_attention_heads": 32})
    report = check_fit(RECIPE, ["vllm", "serve", "org/m"], {}, [_node(0), _node(1)], facts)
    text = " ".join(f.message for f in report.findings)
    assert "= 1 rank:" in text and "1 ranks" not in text and "1 nodes" not in text


def test_removed_settings_read_as_none() -> None:
    assert plural(1, "rank") == "1 rank" and plural(2, "rank") == "2 ranks"
    assert setting_text("tool_call_parser", None) == "tool_call_parser=none"
    assert setting_text("enforce_eager", True) == "enforce_eager=true"
    assert setting_text("max_num_seqs", 8) == "max_num_seqs=8"
    assert change_text("tool_call_parser", "glm47", None) == "tool_call_parser: glm47 -> none"

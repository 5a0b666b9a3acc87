"""The fit check predicts vLLM 0.32's refusal of a step's token budget below its sequence
count (SchedulerConfig: max_num_batched_tokens must be >= max_num_seqs) when the command
gives both, in vLLM's words, and leaves alone what vLLM settles itself."""

from __future__ import annotations

import shlex

from spark_tui.core.facts import GIB, Interface, NodeFacts
from spark_tui.core.fit import check_fit
from spark_tui.core.model_facts import facts_from_metadata
from spark_tui.core.recipe import Recipe
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.serve_rules import batched_below_seqs
from spark_tui.service.evaluate import evaluate
from spark_tui.sim.engine import failures

CODE = "batched_tokens_below_seqs"
RECIPE = Recipe(name="sizes", model="org/m", command="vllm serve {model}", container="img:1")


def _node(name: str = "a", index: int = 1) -> NodeFacts:
    return NodeFacts(
        name=name, address=f"10.0.0.{index}", memory_total_bytes=128 * GIB,
        memory_available_bytes=120 * GIB,
        interfaces=[Interface("enp1s0f1np1", "rocep1s0f1", "up", f"192.168.100.{index}", 200000)],
    )  # fmt: skip


def _facts():  # type: ignore[no-untyped-def]
    return facts_from_metadata(
        "org/m",
        {
            "weight_bytes": 8 * GIB,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 32768,
            "attention": "full",
        },
    )


def _found(flags: str) -> list:  # type: ignore[type-arg]
    argv = shlex.split(f"vllm serve org/m --max-model-len 8192 {flags}")
    report = check_fit(RECIPE, argv, {}, [_node()], _facts())
    return [f for f in report.findings if f.code == CODE]


def test_both_sizes_given_and_the_budget_below_is_refused_in_vllms_words() -> None:
    (found,) = _found("--max-num-seqs 512 --max-num-batched-tokens 256")
    assert found.severity == "error"
    words = "max_num_batched_tokens (256) must be greater than or equal to max_num_seqs (512)."
    assert found.message == f"vLLM will stop at startup on every rank: {words}"
    assert found.remedy == (
        "--set max_num_batched_tokens=512 (at least max_num_seqs), or "
        "--set max_num_seqs=256 (at most max_num_batched_tokens)"
    )
    # The stand-in's refusal says the same (as real vLLM's pydantic error carries it).
    assert batched_below_seqs(256, 512) in failures.batched_below_seqs(256, 512).exc_line


def test_equal_sizes_and_sizes_vllm_settles_itself_are_not_refused() -> None:
    assert not _found("--max-num-seqs 256 --max-num-batched-tokens 256")
    assert not _found("--max-num-seqs 8 --max-num-batched-tokens 4k")
    # A budget given alone: vLLM lowers its default of 256 sequences to it.
    assert not _found("--max-num-batched-tokens 128")
    # Sequences given alone: the budget vLLM defaults to depends on the device.
    assert not _found("--max-num-seqs 16384")


def test_check_launch_tune_and_sweep_share_the_refusal() -> None:
    # The one pipeline every command goes through, with the recipe's own budget (4096).
    recipe = find_recipe("glm-5.3-flash")
    nodes = [_node("a", 1), _node("b", 2)]
    refused = evaluate(recipe, ["max_num_seqs=8192"], nodes)
    assert refused.problem is None and refused.verdict == "does_not_fit"
    assert refused.needs_insisting()
    assert refused.report is not None
    (found,) = [f for f in refused.report.findings if f.code == CODE]
    assert "max_num_batched_tokens (4096) must be greater than or equal to max_num_seqs (8192)" in (
        found.message
    )
    assert "--set max_num_batched_tokens=8192" in found.remedy
    assert "--set max_num_seqs=4096" in found.remedy
    for sets in (["max_num_seqs=4096"], ["max_num_seqs=8192", "max_num_batched_tokens=8192"]):
        fine = evaluate(recipe, sets, nodes)
        assert fine.report is not None
        assert all(f.code != CODE for f in fine.report.findings), sets

"""`check` predicts vLLM 0.32's refusal of an externally load-balanced data-parallel command
in vLLM's own words (vllm/engine/arg_utils.py), and reads the expert count as vLLM does."""

from __future__ import annotations

import shlex

import pytest

from spark_tui.core.facts import GIB, ModelFacts, NodeFacts
from spark_tui.core.fit import check_fit
from spark_tui.core.model_facts import facts_from_hf_config
from spark_tui.core.recipe import Recipe

# What real vLLM 0.32 printed on both ranks of the lab's dense model (LAB-NOTES).
REAL_WORDS = (
    "ValueError: Non-MoE models do not support external data parallel mode. For external "
    "load balancing, launch independent vLLM instances without --data-parallel-* arguments."
)
MODEL = "org/small"


def _nodes(n: int) -> list[NodeFacts]:
    return [
        NodeFacts(
            name=f"spark-{i}",
            address=f"10.0.0.{i + 1}",
            gpu_name="NVIDIA GB10",
            memory_total_bytes=120 * GIB,
            memory_available_bytes=116 * GIB,
            page_cache_bytes=0,
        )
        for i in range(n)
    ]


def _facts(experts: int | None) -> ModelFacts:
    return ModelFacts(
        model_id=MODEL,
        weight_bytes=16 * GIB,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        attention="full",
        max_position_embeddings=32768,
        dtype="bfloat16",
        num_experts=experts,
    )


def _check(flags: str, experts: int | None):
    recipe = Recipe(name="r", model=MODEL, command="vllm serve {model}")
    argv = shlex.split(f"vllm serve {MODEL} --max-model-len 8192 {flags}")
    return check_fit(recipe, argv, {}, _nodes(2), _facts(experts))


def _dp_findings(report):
    return [f for f in report.findings if f.code == "external_data_parallel"]


@pytest.mark.parametrize(
    "switch", ["--data-parallel-external-lb", "-dpe", "--data-parallel-hybrid-lb"]
)
def test_external_load_balancing_of_a_dense_model_is_refused_in_vllms_words(switch: str) -> None:
    report = _check(f"-dp 2 {switch}", experts=0)
    (f,) = _dp_findings(report)
    assert f.severity == "error" and report.verdict == "does_not_fit"
    assert REAL_WORDS in f.message
    assert "drop --data-parallel-" in f.remedy and "one API server on the head" in f.remedy


def test_a_moe_model_without_a_rank_is_refused_in_vllms_other_words() -> None:
    (f,) = _dp_findings(_check("-dp 2 --data-parallel-external-lb", experts=128))
    assert f.severity == "error"
    assert "`--data-parallel-external-lb` requires a data-parallel rank" in f.message
    assert "Non-MoE" not in f.message


def test_an_unknown_expert_count_warns_with_both_wordings() -> None:
    (f,) = _dp_findings(_check("-dp 2 --data-parallel-external-lb", experts=None))
    assert f.severity == "warning" and REAL_WORDS in f.message


@pytest.mark.parametrize(
    "flags", ["-dp 2", "-dp 2 --data-parallel-rank 1", "--data-parallel-external-lb"]
)
def test_the_plans_own_form_and_dp1_are_not_refused(flags: str) -> None:
    # --data-parallel-rank is the plan's to replace (with the start-rank form); DP 1 has no LB.
    assert _dp_findings(_check(flags, experts=0)) == []


def test_expert_count_is_read_by_vllms_names() -> None:
    dense = {"model_type": "qwen2", "num_hidden_layers": 2, "num_attention_heads": 4}
    assert facts_from_hf_config(MODEL, dense, None).num_experts == 0
    for key in ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts"):
        assert facts_from_hf_config(MODEL, {**dense, key: 8}, None).num_experts == 8
    blocks = {**dense, "block_configs": [{"block_type": "moe", "n_routed_experts": 64}]}
    assert facts_from_hf_config(MODEL, blocks, None).num_experts == 64
    # Keys that are not a whole config.json (recipe metadata) leave the count unknown.
    assert facts_from_hf_config(MODEL, {"num_hidden_layers": 2}, None).num_experts is None


def _hang(flags: str, experts: int | None):
    recipe = Recipe(name="r", model=MODEL, command="vllm serve {model}")
    argv = shlex.split(f"vllm serve {MODEL} --max-model-len 8192 {flags}")
    report = check_fit(recipe, argv, {}, _nodes(4), _facts(experts))
    return [f for f in report.findings if f.code == "dense_replicas_across_nodes"]


@pytest.mark.parametrize("flags", ["-tp 2 -dp 2", "-pp 2 -dp 2"])
def test_a_dense_models_replicas_across_nodes_are_refused(flags: str) -> None:
    # Real vLLM 0.32 hangs on it (the lab's TP 2 x DP 2: the head's workers world_size=2,
    # the next node's world_size=4, at the same rendezvous).
    (f,) = _hang(flags, experts=0)
    assert f.severity == "error" and "hang" in f.message and "world of 4 ranks" in f.message
    assert "--set tensor_parallel=1 --set pipeline_parallel=1 --set data_parallel=4" in f.remedy
    (unknown,) = _hang(flags, experts=None)
    assert unknown.severity == "warning" and "if the model is dense" in unknown.message


@pytest.mark.parametrize(("flags", "experts"), [("-dp 4", 0), ("-tp 2 -dp 2", 128), ("-tp 4", 0)])
def test_a_replica_per_node_a_moe_model_and_no_dp_are_not(flags: str, experts: int) -> None:
    assert _hang(flags, experts) == []


def _cpu(flags: str, experts: int | None, env: dict[str, str]):
    recipe = Recipe(name="r", model=MODEL, command="vllm serve {model}")
    argv = shlex.split(f"vllm serve {MODEL} --max-model-len 8192 {flags}")
    report = check_fit(recipe, argv, env, _nodes(2), _facts(experts))
    return [f for f in report.findings if f.code == "cpu_moe_data_parallel"]


CPU = {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_a_moe_models_replicas_on_the_cpu_build_are_refused_with_what_vllm_stops_on() -> None:
    # Real vLLM 0.32's CPU build on the lab, the tiny Qwen3-MoE at DP 2: both forms reach
    # /health, then the first request stops every engine in all_gatherv.
    (f,) = _cpu("-dp 2", 4, CPU)
    assert f.severity == "error" and "NotImplementedError" in f.message
    assert "Worker failed with error ''" in f.message and "first request" in f.message
    assert "--set data_parallel=1 --set tensor_parallel=2" in f.remedy
    (unknown,) = _cpu("-dp 2", None, CPU)
    assert unknown.severity == "warning" and "if the model is MoE" in unknown.message


@pytest.mark.parametrize(
    ("flags", "experts", "env"),
    [("-dp 2", 0, CPU), ("-dp 2", 4, {}), ("-tp 2", 4, CPU), ("-dp 1", 4, CPU)],
)
def test_a_dense_model_a_gpu_build_or_no_dp_are_not(
    flags: str, experts: int, env: dict[str, str]
) -> None:
    assert _cpu(flags, experts, env) == []

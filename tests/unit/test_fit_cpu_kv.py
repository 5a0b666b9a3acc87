"""vLLM's CPU backend sizes each rank's KV cache from VLLM_CPU_KVCACHE_SPACE (whole GiB), not
from gpu_memory_utilization: when a recipe's env sets it (the lab's real-vLLM recipe does),
the fit's KV budget follows it and says so. Held against the real lab's own log: TP 2 of the
tiny model with 1 GiB per rank logged "CPU KV cache size: 1,048,576 tokens, Maximum
concurrency for 2,048 tokens per request: 512.00x"."""

from __future__ import annotations

import re
from pathlib import Path

from spark_tui.core.facts import GIB, NodeFacts
from spark_tui.core.fit import check_fit
from spark_tui.core.model_facts import facts_from_hf_config
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.recipe_loader import parse_recipe
from spark_tui.core.render import render_argv, render_env
from spark_tui.sim.lab import vllm_image

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# The tiny model's config.json as tiny_model_maker writes it (the parts the fit reads).
TINY_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "dtype": "float32",
    "head_dim": 64,
    "hidden_size": 256,
    "intermediate_size": 512,
    "max_position_embeddings": 4096,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "num_key_value_heads": 2,
    "vocab_size": 4096,
    "tie_word_embeddings": False,
}
WEIGHTS = 9 * 1024**2
LAB_NODE_MEMORY = 24 * GIB  # what the real log's "(1.0/23.54) GiB" node had


def _lab(env_change: dict[str, str | None] | None = None, sets: list[str] | None = None):  # type: ignore[no-untyped-def]
    recipe = parse_recipe(vllm_image.recipe_text(2), "tiny-qwen2-vllm-cpu")
    settings = apply_overrides(recipe, sets or [])
    argv = render_argv(recipe, settings)
    env = dict(render_env(recipe))
    for k, v in (env_change or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    nodes = [
        NodeFacts(
            name=f"spark-lab-{i}",
            address=f"10.77.0.{10 + i}",
            memory_total_bytes=LAB_NODE_MEMORY,
            memory_available_bytes=LAB_NODE_MEMORY - 2 * GIB,
        )
        for i in (1, 2)
    ]
    facts = facts_from_hf_config(vllm_image.MODEL_REPO, TINY_CONFIG, WEIGHTS)
    return check_fit(recipe, argv, env, nodes, facts)


def _real_kv_line() -> tuple[int, float]:
    text = (FIXTURES / "vllm-0.32.0-cpu-tp2-head.log").read_text()
    m = re.search(
        r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for [\d,]+ tokens per "
        r"request: ([\d.]+)x",
        text,
    )
    assert m, "the real log's KV cache line"
    assert "Explicitly set (1.0/" in text  # sized from VLLM_CPU_KVCACHE_SPACE=1
    return int(m.group(1).replace(",", "")), float(m.group(2))


def test_the_kv_budget_follows_vllm_cpu_kvcache_space_as_real_vllm_logged_it() -> None:
    report = _lab()
    assert report.verdict == "fits", [f.to_dict() for f in report.findings]
    tokens, concurrency = _real_kv_line()
    for fit in report.nodes:
        assert fit.kv_budget_bytes == 1 * GIB
        assert fit.kv_tokens == tokens  # 1,048,576, word for word with the log
        assert fit.max_concurrency is not None and round(fit.max_concurrency, 2) == concurrency
    (said,) = [f for f in report.findings if f.code == "kv_cache_from_env"]
    assert "VLLM_CPU_KVCACHE_SPACE=1" in said.message and "1 GiB per rank" in said.message


def test_without_the_variable_the_utilization_sizes_it_as_before() -> None:
    report = _lab({"VLLM_CPU_KVCACHE_SPACE": None})
    assert not [f for f in report.findings if f.code == "kv_cache_from_env"]
    for fit in report.nodes:
        assert fit.kv_budget_bytes is not None and fit.kv_budget_bytes > 5 * GIB


def test_the_variable_wins_over_the_flag_and_a_bad_value_is_vllms_error() -> None:
    report = _lab({"VLLM_CPU_KVCACHE_SPACE": "2"}, ["kv_cache_memory_bytes=5G"])
    assert all(fit.kv_budget_bytes == 2 * GIB for fit in report.nodes)
    bad = _lab({"VLLM_CPU_KVCACHE_SPACE": "1.5"})
    assert bad.verdict == "does_not_fit"
    (err,) = [f for f in bad.findings if f.code == "cpu_kv_cache_space"]
    assert "invalid literal for int()" in err.message


def test_more_than_is_free_names_the_variable_not_the_flag() -> None:
    report = _lab({"VLLM_CPU_KVCACHE_SPACE": "40"})
    assert report.verdict == "does_not_fit"
    (err,) = [f for f in report.findings if f.code == "kv_cache_memory_exceeds_free"]
    assert "VLLM_CPU_KVCACHE_SPACE 40.00 GiB" in err.message, err.message
    assert "lower VLLM_CPU_KVCACHE_SPACE" in err.remedy

"""Model facts from recipe metadata and config.json shapes, merged, and what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tui.core.errors import RecipeError
from spark_tui.core.facts import CachedModel, ModelFacts, NodeFacts
from spark_tui.core.model_facts import (
    facts_from_hf_config,
    facts_from_metadata,
    kv_cache_dtype_bytes,
    merge_facts,
    missing_for_fit,
    resolve_model_facts,
)
from spark_tui.core.recipe import Recipe
from spark_tui.core.serve_args import ServeArgs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_llama_without_head_dim_derives_it_from_hidden_size() -> None:
    cfg = {
        "model_type": "llama",
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "hidden_size": 8192,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }
    f = facts_from_hf_config("meta-llama/Llama-3.3-70B-Instruct", cfg, 141125877760)
    assert (f.attention, f.num_key_value_heads, f.head_dim) == ("full", 8, 128)
    assert f.weight_bytes == 141125877760 and f.dtype == "bfloat16"
    assert "hidden_size / num_attention_heads" in f.sources["head_dim"]
    assert missing_for_fit(f, ServeArgs(model="x")) == []


def test_mha_config_without_kv_heads_has_one_kv_head_per_head() -> None:
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 12, "hidden_size": 768}
    f = facts_from_hf_config("gpt2-like", cfg, None)
    assert f.num_key_value_heads == 12 and f.head_dim == 64


def test_qwen3_with_explicit_head_dim_and_unused_sliding_window() -> None:
    cfg = {
        "model_type": "qwen3",
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 4096,
        "sliding_window": 32768,
        "use_sliding_window": False,
        "max_position_embeddings": 40960,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
    }
    f = facts_from_hf_config("Qwen/Qwen3-8B", cfg, None)
    assert f.attention == "full" and f.head_dim == 128
    assert f.max_position_embeddings == 131072  # yarn: 32768 x 4, as vLLM derives it


def test_gpt_oss_layer_types() -> None:
    layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(36)]
    cfg = {
        "model_type": "gpt_oss",
        "num_hidden_layers": 36,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "hidden_size": 2880,
        "sliding_window": 128,
        "layer_types": layer_types,
        "max_position_embeddings": 131072,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
        },
        "quantization_config": {"quant_method": "mxfp4"},
    }
    f = facts_from_hf_config("openai/gpt-oss-120b", cfg, None)
    assert (f.attention, f.full_attention_layers, f.sliding_window) == ("sliding_window", 18, 128)
    assert f.max_position_embeddings == 131072 and f.quantization == "mxfp4"


def test_gemma3_pattern_and_mistral_all_sliding() -> None:
    gemma3 = {
        "model_type": "gemma3_text",
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "sliding_window": 1024,
        "sliding_window_pattern": 6,
    }
    f = facts_from_hf_config("google/gemma-3-12b-it", gemma3, None)
    assert (f.attention, f.full_attention_layers, f.sliding_window) == ("sliding_window", 8, 1024)
    mistral = {
        "model_type": "mistral",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "sliding_window": 4096,
    }
    m = facts_from_hf_config("mistralai/Mistral-7B-v0.1", mistral, None)
    assert (m.attention, m.full_attention_layers, m.sliding_window) == ("sliding_window", 0, 4096)


def test_gemma4_nested_text_config_with_global_shape() -> None:
    config = json.loads((FIXTURES / "constructed_gemma4_26b_a4b_config.json").read_text())
    f = facts_from_hf_config("google/gemma-4-26B-A4B-it", config, None)
    assert (f.num_hidden_layers, f.full_attention_layers, f.sliding_window) == (30, 5, 1024)
    assert (f.num_key_value_heads, f.head_dim) == (8, 256)
    assert (f.num_global_key_value_heads, f.global_head_dim) == (2, 512)


def test_deepseek_style_mla() -> None:
    cfg = {
        "model_type": "deepseek_v3",
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "hidden_size": 7168,
        "num_nextn_predict_layers": 1,
        "max_position_embeddings": 163840,
        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096},
        "torch_dtype": "bfloat16",
    }
    f = facts_from_hf_config("deepseek-ai/DeepSeek-V3", cfg, None)
    assert (f.attention, f.kv_lora_rank, f.qk_rope_head_dim, f.mtp_layers) == ("mla", 512, 64, 1)
    assert f.max_position_embeddings == 163840
    assert f.num_key_value_heads is None  # MLA has no per-head KV cache
    assert missing_for_fit(f, ServeArgs(model="x")) == ["weight_bytes"]


def test_nemotron_h_pattern_and_mamba2_state() -> None:
    cfg = {
        "model_type": "nemotron_h",
        "num_hidden_layers": 52,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
        "mamba_num_heads": 64,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "torch_dtype": "bfloat16",
    }
    f = facts_from_hf_config("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", cfg, None)
    assert (f.attention, f.full_attention_layers, f.linear_layers) == ("hybrid", 6, 23)
    # conv (64*64 + 2*8*128) * (4-1) + ssm 64*64*128, in bf16 (n_groups 8, conv 4: defaults)
    assert f.linear_state_bytes == ((4096 + 2048) * 3 + 4096 * 128) * 2 == 1_085_440


def test_qwen3_next_interval_and_gated_deltanet_state() -> None:
    cfg = {
        "model_type": "qwen3_next",
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "full_attention_interval": 4,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "mtp_num_hidden_layers": 1,
        "torch_dtype": "bfloat16",
    }
    f = facts_from_hf_config("Qwen/Qwen3-Next-80B-A3B-Instruct", cfg, None)
    assert (f.attention, f.full_attention_layers, f.linear_layers, f.mtp_layers) == (
        "hybrid",
        12,
        36,
        1,
    )
    # conv (2*16*128 + 32*128) * 3 + state 32*128*128, bf16
    assert f.linear_state_bytes == ((4096 + 4096) * 3 + 32 * 128 * 128) * 2 == 1_097_728


def test_metadata_facts_with_sources_sizes_and_params() -> None:
    meta = {
        "params": "30.53B",
        "dtype": "bfloat16",
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "attention": "gqa",
        "ple_table_bytes": "47.7GiB",
        "facts_sources": {"num_hidden_layers": "model_facts.tsv"},
    }
    f = facts_from_metadata("Qwen/Qwen3-30B-A3B", meta)
    assert f.weight_bytes == 61_060_000_000  # 30.53e9 params x 2 bytes
    assert f.sources["weight_bytes"].startswith("derived: params x 2")
    assert f.attention == "full"
    assert f.ple_table_bytes == int(47.7 * 2**30)
    assert f.sources["num_hidden_layers"] == "recipe metadata: model_facts.tsv"
    assert f.sources["head_dim"] == "recipe metadata"


def test_metadata_reads_config_style_keys_but_no_config_defaults() -> None:
    meta = {
        "num_hidden_layers": 52,
        "num_attention_heads": 32,
        "attention": "hybrid",
        "full_attention_layers": 6,
        "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    }
    f = facts_from_metadata("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", meta)
    assert f.linear_layers == 23
    # Absent keys say nothing: no "one KV head per head" default, no state invented.
    assert f.num_key_value_heads is None and f.linear_state_bytes is None
    assert missing_for_fit(f, ServeArgs(model="x", max_model_len=4096, kv_cache_dtype="fp8")) == [
        "weight_bytes",
        "num_key_value_heads",
        "head_dim",
        "linear_state_bytes",
    ]
    bare = facts_from_metadata("m", {"num_hidden_layers": 4, "num_attention_heads": 4})
    assert bare.attention is None  # not assumed to be full attention


@pytest.mark.parametrize(
    ("meta", "fragment"),
    [
        ({"attention": "banana"}, "attention"),
        ({"num_hidden_layers": "many"}, "num_hidden_layers"),
        ({"head_dim": 12.5}, "head_dim"),
    ],
)
def test_bad_metadata_is_a_recipe_error(meta: dict[str, object], fragment: str) -> None:
    with pytest.raises(RecipeError) as err:
        facts_from_metadata("m", meta)
    assert fragment in err.value.message and err.value.remedy


def test_merge_keeps_primary_and_fills_from_fallback() -> None:
    a = ModelFacts(model_id="m", num_hidden_layers=10, sources={"num_hidden_layers": "recipe"})
    b = ModelFacts(
        model_id="m",
        num_hidden_layers=99,
        head_dim=128,
        sources={"num_hidden_layers": "cfg", "head_dim": "cfg"},
    )
    m = merge_facts(a, b)
    assert (m.num_hidden_layers, m.head_dim) == (10, 128)
    assert m.sources == {"num_hidden_layers": "recipe", "head_dim": "cfg"}


def _node(name: str, models: list[CachedModel]) -> NodeFacts:
    return NodeFacts(name=name, address="10.0.0.1", models=models)


def test_resolve_takes_what_the_recipe_lacks_from_a_node_models_entry() -> None:
    recipe = Recipe(
        name="r",
        model="Org/Model",
        command="vllm serve {model}",
        metadata={"num_hidden_layers": 40, "facts_sources": {"num_hidden_layers": "card"}},
    )
    cfg = {
        "num_hidden_layers": 99,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    }
    nodes = [
        _node("spark-a", [CachedModel(repo_id="other/model", weight_bytes=1)]),
        _node(
            "spark-b", [CachedModel(repo_id="org/model", config=cfg, weight_bytes=8_000_000_000)]
        ),
    ]
    f = resolve_model_facts(recipe, nodes)
    assert f.num_hidden_layers == 40  # the recipe wins
    assert f.sources["num_hidden_layers"] == "recipe metadata: card"
    assert (f.num_attention_heads, f.weight_bytes, f.attention) == (16, 8_000_000_000, "full")
    assert f.sources["weight_bytes"].startswith("spark-b's Hugging Face cache (org/model)")
    assert missing_for_fit(f, ServeArgs(model="x")) == []


def test_resolve_skips_another_revision() -> None:
    recipe = Recipe(name="r", model="org/m", command="vllm serve {model}", model_revision="abc")
    nodes = [_node("a", [CachedModel(repo_id="org/m", revision="def", weight_bytes=5)])]
    assert resolve_model_facts(recipe, nodes).weight_bytes is None
    nodes = [_node("a", [CachedModel(repo_id="org/m", revision="abc", weight_bytes=5)])]
    assert resolve_model_facts(recipe, nodes).weight_bytes == 5


def test_missing_for_fit_names_exactly_what_each_attention_kind_needs() -> None:
    args = ServeArgs(model="x", max_model_len=8192, kv_cache_dtype="fp8")
    assert missing_for_fit(ModelFacts(model_id="m"), args) == [
        "weight_bytes",
        "num_hidden_layers",
        "num_attention_heads",
        "attention",
        "num_key_value_heads",
        "head_dim",
    ]
    sliding = ModelFacts(
        model_id="m",
        weight_bytes=1,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        attention="sliding_window",
    )
    assert missing_for_fit(sliding, args) == ["sliding_window", "full_attention_layers"]
    mla = ModelFacts(
        model_id="m",
        weight_bytes=1,
        num_hidden_layers=2,
        num_attention_heads=2,
        attention="mla",
        kv_lora_rank=512,
    )
    assert missing_for_fit(mla, args) == ["qk_rope_head_dim"]
    # No max_model_len: the model's maximum is needed; KV "auto": the model's dtype is.
    full = ModelFacts(
        model_id="m",
        weight_bytes=1,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        attention="full",
    )
    assert missing_for_fit(full, ServeArgs(model="x")) == ["max_position_embeddings", "dtype"]
    assert missing_for_fit(full, ServeArgs(model="x", dtype="bfloat16", max_model_len=4)) == []


def test_kv_cache_dtype_bytes() -> None:
    f = ModelFacts(model_id="m", dtype="float16")
    assert kv_cache_dtype_bytes(f, ServeArgs(model="x")) == 2
    assert kv_cache_dtype_bytes(f, ServeArgs(model="x", kv_cache_dtype="fp8_e4m3")) == 1
    assert kv_cache_dtype_bytes(f, ServeArgs(model="x", dtype="float32")) == 4
    assert kv_cache_dtype_bytes(ModelFacts(model_id="m"), ServeArgs(model="x")) is None

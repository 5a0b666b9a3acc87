"""Which attention backend vLLM runs a model with on a Spark, and what FlashInfer costs."""

from __future__ import annotations

from spark_tui.core.attention_backend import FLASHINFER, attention_backend
from spark_tui.core.facts import ModelFacts
from spark_tui.core.fit import (
    FLASHINFER_DECODE_WRAPPER_BYTES,
    FLASHINFER_WORKSPACE_BYTES,
    capture_sizes,
    runtime_overhead,
)
from spark_tui.core.kv_cache import layout_for
from spark_tui.core.serve_args import ServeArgs, parse_serve_args


def args(flags: str = "") -> ServeArgs:
    return parse_serve_args(["vllm", "serve", "m", *flags.split()])


def gemma3_12b() -> ModelFacts:
    # 48 layers, every 6th global: 8 full-attention and 40 sliding-window layers.
    return ModelFacts(
        model_id="google/gemma-3-12b-it",
        num_hidden_layers=48,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=256,
        attention="sliding_window",
        full_attention_layers=8,
        sliding_window=1024,
        dtype="bfloat16",
    )


def test_a_quantised_kv_cache_goes_to_flashinfer_on_a_spark() -> None:
    facts = gemma3_12b()
    assert attention_backend(args("--kv-cache-dtype fp8"), facts, {}, unified=True) == FLASHINFER
    assert attention_backend(args("--kv-cache-dtype nvfp4"), facts, {}, unified=True) == FLASHINFER
    # bf16 KV stays on FlashAttention; off a Spark the GPU decides, not modelled here.
    assert attention_backend(args(), facts, {}, unified=True) is None
    assert attention_backend(args("--kv-cache-dtype fp8"), facts, {}, unified=False) is None


def test_mixed_head_sizes_and_mla_are_not_flashinfer() -> None:
    gemma4 = ModelFacts(
        model_id="g4", head_dim=256, global_head_dim=512, attention="sliding_window"
    )
    assert attention_backend(args("--kv-cache-dtype fp8"), gemma4, {}, unified=True) is None
    mla = ModelFacts(model_id="ds", head_dim=128, attention="mla")
    assert attention_backend(args("--kv-cache-dtype fp8"), mla, {}, unified=True) is None


def test_a_named_backend_wins() -> None:
    named = args("--attention-backend flashinfer")
    assert attention_backend(named, None, {}, unified=False) == FLASHINFER
    env = {"VLLM_ATTENTION_BACKEND": "TRITON_ATTN"}
    assert attention_backend(args("--kv-cache-dtype fp8"), gemma3_12b(), env, unified=True) == (
        "TRITON_ATTN"
    )


def test_capture_sizes_are_vllms_defaults() -> None:
    assert len(capture_sizes(512)) == 51  # "PIECEWISE=51 (largest=512)"
    assert len(capture_sizes(256)) == 35  # "FULL=35 (largest=256)"
    assert len(capture_sizes(128)) == 19  # "FULL=19 (largest=128)"
    assert capture_sizes(8) == [1, 2, 4, 8]


def test_attention_groups_follow_vllms_layer_grouping() -> None:
    layout = layout_for(gemma3_12b(), ServeArgs(model="m"))
    assert layout is not None and layout.attention_groups() == 6  # 8 full + 5 x 8 sliding
    # gemma-3-27b: 10 full and 52 sliding layers, padded to 6 sliding groups of 10.
    big = layout_for(
        ModelFacts(
            model_id="g27",
            num_hidden_layers=62,
            num_key_value_heads=16,
            head_dim=128,
            attention="sliding_window",
            full_attention_layers=10,
            sliding_window=1024,
            dtype="bfloat16",
        ),
        ServeArgs(model="m"),
    )
    assert big is not None and big.attention_groups() == 7


def test_flashinfer_adds_workspaces_and_decode_wrappers_per_group() -> None:
    facts = gemma3_12b()
    plain = runtime_overhead(args(), facts)
    fp8 = runtime_overhead(args("--kv-cache-dtype fp8"), facts)
    # 6 groups, each a 394 MiB workspace and 35 decode wrappers of 8 MiB.
    added = 6 * (FLASHINFER_WORKSPACE_BYTES + 35 * FLASHINFER_DECODE_WRAPPER_BYTES)
    assert fp8.cuda_graph_bytes - plain.cuda_graph_bytes == added
    fewer = runtime_overhead(args("--kv-cache-dtype fp8 --max-num-seqs 128"), facts)
    plain_fewer = runtime_overhead(args("--max-num-seqs 128"), facts)
    added_fewer = 6 * (FLASHINFER_WORKSPACE_BYTES + 19 * FLASHINFER_DECODE_WRAPPER_BYTES)
    assert fewer.cuda_graph_bytes - plain_fewer.cuda_graph_bytes == added_fewer
    # No full decode graphs (piecewise only), or none at all: no decode wrappers captured.
    piecewise = runtime_overhead(args("--kv-cache-dtype fp8 -cc.cudagraph_mode=PIECEWISE"), facts)
    assert piecewise.cuda_graph_bytes == plain.cuda_graph_bytes
    eager = runtime_overhead(args("--kv-cache-dtype fp8 --enforce-eager"), facts)
    assert eager.cuda_graph_bytes == 0

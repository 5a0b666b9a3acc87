"""The fit validator: parallel layout, memory per node, KV cache, verdicts and the JSON shape."""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from spark_tui.core.facts import GIB, ModelFacts, NodeFacts, parse_facts
from spark_tui.core.fit import (
    DROP_CACHES,
    NON_TORCH_SPREAD_BYTES,
    WEIGHT_LOAD_FACTOR,
    FitReport,
    check_fit,
    runtime_overhead,
    weights_per_rank_bytes,
)
from spark_tui.core.kv_cache import KVLayout, LayerKind, layout_for
from spark_tui.core.model_facts import resolve_model_facts
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.recipe import Recipe
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.render import render_argv, render_env
from spark_tui.core.serve_args import ServeArgs, parse_serve_args

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MEM_128 = 125_513_720 * 1024  # a 128 GB GB10's MemTotal (free_kib_gb10.txt)
MEM_64 = 62_756_860 * 1024


def node(
    name: str,
    total: int | None = MEM_128,
    available: int | None = None,
    page_cache: int | None = 2 * GIB,
    gpu: str | None = "NVIDIA GB10",
) -> NodeFacts:
    if available is None and total is not None:
        available = total - 4 * GIB
    return NodeFacts(
        name=name,
        address=f"10.0.0.{len(name)}",
        gpu_name=gpu,
        memory_total_bytes=total,
        memory_available_bytes=available,
        page_cache_bytes=page_cache,
    )


def llama70b() -> ModelFacts:
    return ModelFacts(
        model_id="meta-llama/Llama-3.3-70B-Instruct",
        weight_bytes=141_125_877_760,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        attention="full",
        max_position_embeddings=131072,
        dtype="bfloat16",
    )


def recipe(min_nodes: int = 1, max_nodes: int | None = None, runtime: str = "vllm-distributed"):
    return Recipe(
        name="test-recipe",
        model="meta-llama/Llama-3.3-70B-Instruct",
        command="vllm serve {model}",
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        runtime=runtime,
    )


def argv(flags: str) -> list[str]:
    return shlex.split("vllm serve meta-llama/Llama-3.3-70B-Instruct " + flags)


def codes(report: FitReport) -> list[str]:
    return [f.code for f in report.findings]


def finding(report: FitReport, code: str):
    matches = [f for f in report.findings if f.code == code]
    assert matches, (code, report.to_dict())
    return matches[0]


# --- the playbook recipes (bundled) on simulated clusters -----------------------------------


def bundled_check(
    name: str,
    facts_file: str | None,
    sets: list[str] | None = None,
    nodes: list[NodeFacts] | None = None,
) -> FitReport:
    r = find_recipe(name)
    argv_ = render_argv(r, apply_overrides(r, sets or []))
    if nodes is None:
        assert facts_file is not None
        nodes = parse_facts((FIXTURES / facts_file).read_text(), source=facts_file)
    return check_fit(r, argv_, render_env(r), nodes, resolve_model_facts(r, nodes))


def test_glm_fits_on_two_128gb_sparks_with_model_facts_from_the_facts_file() -> None:
    report = bundled_check("glm-5.3-flash", "simulated_facts_glm53_2x128.json")
    assert report.verdict == "fits", report.to_dict()
    weights = int(114.6 * GIB / 2 * WEIGHT_LOAD_FACTOR)
    r = find_recipe("glm-5.3-flash")
    nodes = parse_facts((FIXTURES / "simulated_facts_glm53_2x128.json").read_text())
    overhead = runtime_overhead(
        parse_serve_args(render_argv(r, apply_overrides(r, []))), resolve_model_facts(r, nodes)
    ).total_bytes
    for n in report.nodes:
        assert abs(n.weights_bytes - weights) <= 2  # 114.6 GiB (simulated) over TP 2
        assert n.budget_bytes == int(0.87 * MEM_128)
        assert n.kv_budget_bytes == n.budget_bytes - weights - overhead
        assert n.max_concurrency is not None and n.max_concurrency > 1
    assert report.parallel["tensor_parallel"] == 2 and report.parallel["nodes"] == 2


def test_glm_recipe_alone_is_unknown_naming_exactly_the_missing_facts() -> None:
    report = bundled_check("glm-5.3-flash", None, nodes=[node("spark-a"), node("spark-b")])
    assert report.verdict == "unknown"
    assert report.missing == [
        "weight_bytes",
        "num_hidden_layers",
        "num_attention_heads",
        "attention",
        "num_key_value_heads",
        "head_dim",
    ]
    f = finding(report, "facts_missing")
    assert "weight_bytes, num_hidden_layers, num_attention_heads, attention, " in f.message
    assert "`models` entry for nvidia/GLM-5.3-Flash-FP4-Local with `config`" in f.remedy
    # Nothing is invented: no weights, no KV figures.
    assert all(n.weights_bytes is None and n.kv_budget_bytes is None for n in report.nodes)


def test_glm_does_not_fit_two_64gb_sparks() -> None:
    report = bundled_check("glm-5.3-flash", "simulated_facts_glm53_2x64.json")
    assert report.verdict == "does_not_fit"
    f = finding(report, "weights_exceed_budget")
    assert f.severity == "error" and f.message.startswith("all nodes: weights need 58.")
    assert "No available memory for the cache blocks" in f.message
    assert "tensor_parallel" in f.remedy


def test_qwen38_fits_on_two_64gb_sparks_with_its_3g_kv_budget() -> None:
    report = bundled_check("qwen3.8-flash-next", "simulated_facts_qwen38_2x64.json")
    assert report.verdict == "fits", report.to_dict()
    for n in report.nodes:
        assert n.kv_budget_bytes == 3 * 2**30  # --kv-cache-memory-bytes 3G: vLLM's 3 GiB
        # VLLM_PLE_TABLE_MEMORY=disk keeps the 47.7 GiB PLE table out of the weights.
        expected = (round(123.57 * GIB) - round(47.7 * GIB)) / 2 * WEIGHT_LOAD_FACTOR
        assert abs(n.weights_bytes - expected) <= 2


def test_tp3_on_three_nodes_gives_vllms_heads_message() -> None:
    nodes = parse_facts((FIXTURES / "simulated_facts_glm53_2x128.json").read_text())
    third = NodeFacts.from_dict({**nodes[1].to_dict(), "name": "spark-c"})
    report = bundled_check("glm-5.3-flash", None, ["tensor_parallel=3"], nodes=[*nodes, third])
    assert report.verdict == "does_not_fit"
    f = finding(report, "tp_heads")
    assert f.message == (
        "Total number of attention heads (64) must be divisible by tensor parallel size (3)."
    )
    assert "1, 2, 4, 8" in f.remedy and "--set tensor_parallel=" in f.remedy
    assert "nodes_mismatch" not in codes(report)  # 3 x 1 x 1 = 3 nodes
    assert "too_many_nodes" in codes(report)  # the recipe says at most 2


def test_kv_heads_that_tp_does_not_split_stop_vllm_at_load() -> None:
    # 24 query heads split over TP 4, but 6 KV heads do not: vLLM's divide() asserts.
    facts = replace(llama70b(), num_attention_heads=24, num_key_value_heads=6)
    nodes = [node(n) for n in "abcd"]
    report = check_fit(recipe(), argv("-tp 4"), {}, nodes, facts)
    f = finding(report, "tp_kv_heads")
    assert f.message.startswith(
        "vLLM will stop at load with AssertionError: 6 is not divisible by 4"
    )
    assert "1, 2, 3, 6" in f.remedy and report.verdict == "does_not_fit"
    # Fewer KV heads than ranks: whole ranks per head (8 over 16 is fine, 3 over 4 is not).
    assert "tp_kv_heads" not in codes(check_fit(recipe(), argv("-tp 2"), {}, nodes[:2], facts))
    three = replace(llama70b(), num_key_value_heads=3)
    f = finding(check_fit(recipe(), argv("-tp 4"), {}, nodes, three), "tp_kv_heads")
    assert "AssertionError: 4 is not divisible by 3" in f.message
    # Gemma 4's global layers have their own, fewer KV heads.
    gemma = replace(llama70b(), num_key_value_heads=8, num_global_key_value_heads=2)
    assert "tp_kv_heads" not in codes(check_fit(recipe(), argv("-tp 4"), {}, nodes, gemma))
    odd = replace(gemma, num_global_key_value_heads=3)
    assert "tp_kv_heads" in codes(check_fit(recipe(), argv("-tp 4"), {}, nodes, odd))


# --- parallel layout ---------------------------------------------------------------------------


def test_fewer_ranks_than_nodes_run_on_the_first_nodes() -> None:
    report = check_fit(
        recipe(),
        argv("--tensor-parallel-size 2"),
        {},
        [node("a"), node("b"), node("c")],
        llama70b(),
    )
    f = finding(report, "nodes_left_out")
    assert f.severity == "info"
    assert f.message == (
        "TP 2 x PP 1 x DP 1 = 2 ranks: runs on a, b (the first 2 nodes given); left out: c"
    )
    assert report.nodes_used == ["a", "b"] and report.nodes_left_out == ["c"]
    assert [n.name for n in report.nodes] == ["a", "b"]
    assert report.to_dict()["nodes_left_out"] == ["c"]
    assert "nodes_mismatch" not in codes(report)


def test_more_ranks_than_nodes_does_not_fit() -> None:
    report = check_fit(
        recipe(), argv("--tensor-parallel-size 4"), {}, [node("a"), node("b")], llama70b()
    )
    f = finding(report, "nodes_mismatch")
    assert f.message == "TP 4 x PP 1 x DP 1 = 4 ranks (one per Spark), but only 2 nodes given"
    assert f.remedy == (
        "--set tensor_parallel=2 to run on the 2 nodes given, or give 4 nodes "
        "(inventory, --hosts or facts file)"
    )
    assert report.verdict == "does_not_fit"


def test_single_node_recipe_on_two_nodes_has_no_contradicting_remedies() -> None:
    # A recipe for one Spark (max_nodes 1, TP 1) given two: it runs on the first, and no
    # finding asks for both "use all 2 nodes" and "at most 1 node".
    one = recipe(max_nodes=1)
    report = check_fit(one, argv(""), {}, [node("a"), node("b")], llama70b())
    assert "nodes_mismatch" not in codes(report) and "too_many_nodes" not in codes(report)
    f = finding(report, "nodes_left_out")
    assert "runs on a" in f.message and "left out: b" in f.message
    assert "at most 1 node" in f.remedy and "tensor_parallel" not in f.remedy
    # Asking for TP 2 on it is refused with one remedy that respects the recipe.
    report = check_fit(one, argv("-tp 2"), {}, [node("a"), node("b")], llama70b())
    f = finding(report, "too_many_nodes")
    assert "--set tensor_parallel=1" in f.remedy
    assert "nodes_mismatch" not in codes(report)
    remedies = " ".join(x.remedy for x in report.findings)
    assert "tensor_parallel=2" not in remedies


def test_recipe_node_limits_pp_layers_and_ray_dp() -> None:
    r = check_fit(recipe(min_nodes=2), argv(""), {}, [node("a")], llama70b())
    assert "too_few_nodes" in codes(r)
    r = check_fit(recipe(), argv("-pp 81"), {}, [node(f"n{i}") for i in range(81)], llama70b())
    assert "pp_layers" in codes(r)
    r = check_fit(
        recipe(runtime="vllm-ray"),
        argv("--data-parallel-size 2"),
        {},
        [node("a"), node("b")],
        llama70b(),
    )
    assert finding(r, "ray_data_parallel").severity == "error"
    r = check_fit(
        recipe(),
        argv("--data-parallel-size 2 --distributed-executor-backend ray"),
        {},
        [node("a"), node("b")],
        llama70b(),
    )
    assert "ray_data_parallel" in codes(r)
    r = check_fit(recipe(), argv("--data-parallel-size 2"), {}, [node("a"), node("b")], llama70b())
    assert "ray_data_parallel" not in codes(r)


def test_nodes_of_different_memory_sizes() -> None:
    r = check_fit(recipe(), argv("-tp 2"), {}, [node("a"), node("b", total=MEM_64)], llama70b())
    f = finding(r, "memory_size_mismatch")
    assert f.severity == "error" and "same memory size" in f.remedy
    # A few percent apart (kernel versions) is a warning at most; identical is nothing.
    r = check_fit(
        recipe(), argv("-tp 2"), {}, [node("a"), node("b", total=int(MEM_128 * 0.95))], llama70b()
    )
    assert finding(r, "memory_size_mismatch").severity == "warning"
    r = check_fit(recipe(), argv("-tp 2"), {}, [node("a"), node("b")], llama70b())
    assert "memory_size_mismatch" not in codes(r)


# --- memory per node ----------------------------------------------------------------------------


def test_llama70b_tp2_fits_with_hand_computed_table() -> None:
    r = check_fit(
        recipe(),
        argv("-tp 2 --max-model-len 32768 --gpu-memory-utilization 0.85"),
        {},
        [node("a"), node("b")],
        llama70b(),
    )
    assert r.verdict == "fits", r.to_dict()
    n = r.nodes[0]
    assert n.budget_bytes == int(0.85 * MEM_128)
    assert n.weights_bytes == int(141_125_877_760 / 2 * WEIGHT_LOAD_FACTOR)
    assert n.headroom_bytes == MEM_128 - n.budget_bytes
    assert n.available_headroom_bytes == (MEM_128 - 4 * GIB) - n.budget_bytes
    kv = n.budget_bytes - n.weights_bytes - runtime_overhead(ServeArgs(model="x")).total_bytes
    assert n.kv_budget_bytes == kv
    per_token = 80 * 2 * (8 // 2) * 128 * 2  # layers x K,V x heads per rank x dim x bf16
    assert n.kv_per_request_bytes == 32768 * per_token
    blocks = kv // (16 * per_token)
    assert n.kv_tokens == blocks * 16
    assert n.max_concurrency == pytest.approx(blocks / (32768 / 16))


def test_page_cache_in_the_way_gives_the_drop_caches_remedy() -> None:
    # MemAvailable 110 GiB covers the 0.87 budget (~104 GiB), but 30 GiB of it is page cache.
    a = node("spark-a", available=110 * GIB, page_cache=30 * GIB)
    r = check_fit(
        recipe(),
        argv("-tp 2 --gpu-memory-utilization 0.87 --max-model-len 8192"),
        {},
        [a, node("spark-b")],
        llama70b(),
    )
    f = finding(r, "page_cache")
    assert f.severity == "error" and f.message.startswith("spark-a: vLLM will stop at startup: ")
    assert (
        "Free memory on device cuda:0 (80.00/119.70 GiB) on startup is less than desired GPU "
        "memory utilization (0.87, 104.14 GiB)." in f.message
    )
    assert "30.00 GiB of it is page cache" in f.message
    assert f.remedy.endswith(DROP_CACHES)
    assert DROP_CACHES == "sudo sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'"
    assert r.verdict == "does_not_fit"


def test_real_memory_shortage_is_not_blamed_on_the_page_cache() -> None:
    a = node("spark-a", available=60 * GIB, page_cache=1 * GIB)
    r = check_fit(
        recipe(), argv("-tp 2 --gpu-memory-utilization 0.87"), {}, [a, node("spark-b")], llama70b()
    )
    f = finding(r, "free_memory")
    assert "(60.00/119.70 GiB)" in f.message and "Decrease GPU memory utilization" in f.message
    assert "gpu_memory_utilization=0.49" in f.remedy and "drop_caches" not in f.remedy
    assert "page_cache" not in codes(r)


def test_kv_cache_memory_bytes_wins_over_utilization() -> None:
    base = "-tp 2 --max-model-len 8192 --kv-cache-memory-bytes 3G"
    for util in ("0.5", "0.9"):
        r = check_fit(
            recipe(),
            argv(f"{base} --gpu-memory-utilization {util}"),
            {},
            [node("a"), node("b")],
            llama70b(),
        )
        assert all(n.kv_budget_bytes == 3 * 2**30 for n in r.nodes)
    # Too large for the free memory: weights + runtime + KV must fit what is free.
    r = check_fit(
        recipe(),
        argv("-tp 2 --max-model-len 8192 --kv-cache-memory-bytes 60G"),
        {},
        [node("a"), node("b")],
        llama70b(),
    )
    assert "kv_cache_memory_exceeds_free" in codes(r)


def test_max_seq_len_failure_with_vllms_words_and_the_estimated_length() -> None:
    r = check_fit(
        recipe(),
        argv("-tp 2 --gpu-memory-utilization 0.72"),
        {},
        [node("a"), node("b")],
        llama70b(),
    )
    f = finding(r, "kv_max_seq_len")
    n = r.nodes[0]
    assert (
        "To serve at least one request with the models's max seq len (131072), (20.00 GiB "
        "KV cache is needed, which is larger than the available KV cache memory" in f.message
    )
    facts, args = llama70b(), parse_serve_args(argv("-tp 2 --gpu-memory-utilization 0.72"))
    layout = layout_for(facts, args)
    assert layout is not None and n.kv_budget_bytes is not None
    estimate = layout.max_len_for(n.kv_budget_bytes, 131072)
    assert layout.request_bytes(estimate) <= n.kv_budget_bytes < layout.request_bytes(estimate + 1)
    assert f"the estimated maximum model length is {estimate}." in f.message
    # The length the remedy names leaves free what vLLM's non-torch memory varies by on GB10.
    clear = layout.max_len_for(n.kv_budget_bytes - NON_TORCH_SPREAD_BYTES, 131072)
    assert 0 < clear < estimate
    assert f"--set max_model_len={clear} (vLLM's estimate less the 2.81 GiB" in f.remedy
    assert "kv_cache_dtype=fp8" in f.remedy
    assert r.verdict == "does_not_fit"


def test_no_memory_left_for_cache_blocks() -> None:
    # Weights fit the budget, the runtime overhead does not: vLLM's negative KV case.
    util = (141_125_877_760 / 2 * WEIGHT_LOAD_FACTOR + GIB) / MEM_128
    r = check_fit(
        recipe(),
        argv(f"-tp 2 --gpu-memory-utilization {util:.4f}"),
        {},
        [node("a"), node("b")],
        llama70b(),
    )
    f = finding(r, "no_kv_memory")
    assert (
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
        in f.message
    )
    assert "weights_exceed_budget" not in codes(r)
    # The utilization the remedy names holds weights, runtime and one full-length request,
    # and leaves free what vLLM's non-torch memory varies by on GB10.
    m = re.search(r"gpu_memory_utilization=(0\.\d\d)", f.remedy)
    assert m
    n = r.nodes[0]
    assert n.weights_bytes is not None and n.overhead_bytes and n.kv_per_request_bytes
    need = n.weights_bytes + n.overhead_bytes + n.kv_per_request_bytes + NON_TORCH_SPREAD_BYTES
    assert float(m.group(1)) * MEM_128 >= need > (float(m.group(1)) - 0.01) * MEM_128


def test_high_utilization_on_unified_memory_warns() -> None:
    r = check_fit(
        recipe(),
        argv("-tp 2 --max-model-len 8192 --gpu-memory-utilization 0.95"),
        {},
        [
            node("a", available=MEM_128 - GIB, page_cache=0),
            node("b", available=MEM_128 - GIB, page_cache=0),
        ],
        llama70b(),
    )
    assert r.verdict == "fits_with_warnings"
    assert finding(r, "system_headroom").severity == "warning"


def test_concurrency_below_max_num_seqs_is_only_information() -> None:
    r = check_fit(
        recipe(),
        argv("-tp 2 --max-num-seqs 256 --max-model-len 131072 --gpu-memory-utilization 0.88"),
        {},
        [node("a"), node("b")],
        llama70b(),
    )
    f = finding(r, "concurrency_at_full_length")
    assert f.severity == "info" and r.verdict == "fits"


def test_max_model_len_beyond_the_model() -> None:
    r = check_fit(
        recipe(), argv("-tp 2 --max-model-len 200000"), {}, [node("a"), node("b")], llama70b()
    )
    assert finding(r, "max_model_len_exceeds_model").severity == "error"
    r = check_fit(
        recipe(),
        argv("-tp 2 --max-model-len 200000"),
        {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
        [node("a"), node("b")],
        llama70b(),
    )
    assert finding(r, "max_model_len_exceeds_model").severity == "warning"


def test_missing_node_memory_is_unknown_and_errors_still_win() -> None:
    r = check_fit(
        recipe(), argv("-tp 2"), {}, [node("a"), node("b", total=None, available=None)], llama70b()
    )
    assert r.verdict == "unknown"
    assert r.missing == ["b:memory_total_bytes", "b:memory_available_bytes"]
    assert "node facts: b:memory_total_bytes" in finding(r, "facts_missing").message
    r = check_fit(recipe(), argv("-tp 3"), {}, [node("a"), node("b", total=None)], llama70b())
    assert r.verdict == "does_not_fit"  # an error outranks unknown


def test_weights_per_rank_minus_a_ple_table_on_disk() -> None:
    facts = ModelFacts(model_id="m", weight_bytes=100 * GIB, ple_table_bytes=40 * GIB)
    args = ServeArgs(model="m", tensor_parallel_size=2, pipeline_parallel_size=2)
    assert weights_per_rank_bytes(facts, args, {}) == int(100 * GIB / 4 * WEIGHT_LOAD_FACTOR)
    on_disk = weights_per_rank_bytes(facts, args, {"VLLM_PLE_TABLE_MEMORY": "disk"})
    assert on_disk == int(60 * GIB / 4 * WEIGHT_LOAD_FACTOR)


def test_language_model_only_drops_the_encoders_from_the_weights() -> None:
    # vLLM builds no vision tower with --language-model-only: its tensors are not loaded.
    facts = ModelFacts(model_id="m", weight_bytes=48 * GIB, encoder_bytes=1 * GIB)
    whole = weights_per_rank_bytes(facts, parse_serve_args(["vllm", "serve", "m"]), {})
    lm_only = parse_serve_args(["vllm", "serve", "m", "--language-model-only"])
    assert whole == int(48 * GIB * WEIGHT_LOAD_FACTOR)
    assert weights_per_rank_bytes(facts, lm_only, {}) == int(47 * GIB * WEIGHT_LOAD_FACTOR)
    negated = parse_serve_args(["vllm", "serve", "m", "--no-language-model-only"])
    assert weights_per_rank_bytes(facts, negated, {}) == whole
    unknown = ModelFacts(model_id="m", weight_bytes=48 * GIB)  # encoder size not known
    assert weights_per_rank_bytes(unknown, lm_only, {}) == whole


# --- KV formulas against hand-computed numbers ---------------------------------------------------


def test_full_attention_kv_and_replicated_kv_heads() -> None:
    f = llama70b()
    layout = layout_for(f, ServeArgs(model="m", tensor_parallel_size=2))
    assert layout is not None and layout.kinds == (LayerKind("full", 80, 2 * 4 * 128 * 2),)
    assert layout.request_bytes(8192) == 80 * 8192 * 2048
    assert layout.request_bytes(8200) == 80 * 8208 * 2048  # whole 16-token blocks
    # 8 KV heads over TP 16: vLLM replicates, one head per rank.
    wide = layout_for(f, ServeArgs(model="m", tensor_parallel_size=16))
    assert wide is not None and wide.kinds[0].bytes_per_token == 2 * 1 * 128 * 2
    fp8 = layout_for(f, ServeArgs(model="m", kv_cache_dtype="fp8"))
    assert fp8 is not None and fp8.kinds[0].bytes_per_token == 2 * 8 * 128 * 1
    pp = layout_for(f, ServeArgs(model="m", pipeline_parallel_size=2))
    assert pp is not None and pp.kinds[0].layers == 40  # pipeline stages split the layers


def test_sliding_window_kv_grows_only_in_full_layers() -> None:
    f = ModelFacts(
        model_id="openai/gpt-oss-120b",
        num_hidden_layers=36,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        attention="sliding_window",
        sliding_window=128,
        full_attention_layers=18,
        dtype="bfloat16",
    )
    layout = layout_for(f, ServeArgs(model="m", max_num_batched_tokens=2048))
    assert layout is not None
    per_token = 2 * 8 * 64 * 2
    full = 18 * 131072 * per_token
    # sliding: the last 127 tokens + one 2048-token chunk, in 16-token blocks, plus one block
    sliding = 18 * (math.ceil((127 + 2048) / 16) + 1) * 16 * per_token
    assert layout.request_bytes(131072) == full + sliding == 4_912_644_096
    # A short request: the sliding layers hold at most the request itself.
    assert layout.request_bytes(1024) == 18 * 1024 * per_token + 18 * (64 + 1) * 16 * per_token


def test_gemma4_style_global_layers_use_their_own_shape() -> None:
    f = ModelFacts(
        model_id="g",
        num_hidden_layers=30,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=256,
        num_global_key_value_heads=2,
        global_head_dim=512,
        attention="sliding_window",
        sliding_window=1024,
        full_attention_layers=5,
        dtype="bfloat16",
    )
    layout = layout_for(f, ServeArgs(model="g", max_num_batched_tokens=4096))
    assert layout is not None
    assert layout.kinds == (
        LayerKind("full", 5, 2 * 2 * 512 * 2),
        LayerKind("sliding", 25, 2 * 8 * 256 * 2, window=1024),
    )
    # vLLM: one page size (16 x 8192 B), groups of 5 layers, 6 groups, tokens per group.
    budget = 40 * GIB
    blocks = budget // (16 * 8192 * 5)
    assert layout.tokens(budget) == blocks // 6 * 16


def test_mla_kv_is_one_latent_per_token_replicated_across_tp() -> None:
    f = ModelFacts(
        model_id="glm",
        num_hidden_layers=45,
        num_attention_heads=64,
        attention="mla",
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        mtp_layers=1,
    )
    mtp = ServeArgs(
        model="glm",
        tensor_parallel_size=2,
        kv_cache_dtype="fp8",
        block_size=256,
        speculative_config={"method": "mtp", "num_speculative_tokens": 5},
    )
    layout = layout_for(f, mtp)
    assert layout is not None and layout.kinds == (LayerKind("mla", 46, 576),)  # + 1 MTP layer
    assert layout.request_bytes(500000) == 46 * math.ceil(500000 / 256) * 256 * 576
    plain = layout_for(f, ServeArgs(model="glm", tensor_parallel_size=2, kv_cache_dtype="fp8"))
    assert plain is not None and plain.kinds == (LayerKind("mla", 45, 576),)
    ds = layout_for(f, ServeArgs(model="glm", kv_cache_dtype="fp8_ds_mla"))
    assert ds is not None and ds.kinds[0].bytes_per_token == 656
    dcp = layout_for(
        f, ServeArgs(model="glm", kv_cache_dtype="fp8", decode_context_parallel_size=2)
    )
    assert dcp is not None and dcp.kinds[0].bytes_per_token == 288


def test_hybrid_kv_counts_attention_layers_and_one_state_per_sequence() -> None:
    f = ModelFacts(
        model_id="q",
        num_hidden_layers=40,
        num_attention_heads=32,
        num_key_value_heads=2,
        head_dim=256,
        attention="hybrid",
        full_attention_layers=20,
        linear_layers=20,
        linear_state_bytes=1_097_728,
    )
    args = ServeArgs(model="q", tensor_parallel_size=2, kv_cache_dtype="fp8", block_size=16)
    layout = layout_for(f, args)
    assert layout is not None
    state = 1_097_728 // 2  # heads split over TP 2
    assert layout.kinds == (
        LayerKind("full", 20, 2 * 1 * 256 * 1),
        LayerKind("linear", 20, state_bytes=state),
    )
    # vLLM grows the attention block until one page holds a whole state: 16 x ceil(S/(16x512)).
    block = 16 * math.ceil(state / (16 * 512))
    assert layout.attention_block_size() == block == 1072
    page = block * 512
    assert layout.request_bytes(262144) == 20 * math.ceil(262144 / block) * page + 20 * page
    budget = 3 * 2**30
    blocks = budget // (page * 20)  # groups of 20 layers: one attention, one linear group
    assert layout.tokens(budget) == blocks // 2 * block
    assert layout.max_concurrency(budget, 262144) == pytest.approx(
        blocks / (math.ceil(262144 / block) + 1)
    )


def test_unknown_layout_when_facts_are_missing() -> None:
    assert (
        layout_for(
            ModelFacts(model_id="m", num_hidden_layers=2, attention="full"),
            ServeArgs(model="m", kv_cache_dtype="fp8"),
        )
        is None
    )
    assert KVLayout(kinds=()).tokens(GIB) == 0


# --- JSON shape ------------------------------------------------------------------------------------


def test_json_shape_is_the_check_contract() -> None:
    import json

    report = bundled_check("glm-5.3-flash", "simulated_facts_glm53_2x128.json")
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["verdict"] in ("fits", "fits_with_warnings", "does_not_fit", "unknown")
    for f in doc["findings"]:
        assert set(f) == {"severity", "code", "message", "remedy"}
        assert f["severity"] in ("error", "warning", "info") and f["message"] and f["remedy"]
    assert [n["name"] for n in doc["nodes"]] == ["spark-a", "spark-b"]
    required = {
        "name",
        "budget_bytes",
        "weights_bytes",
        "kv_budget_bytes",
        "kv_per_request_bytes",
        "max_concurrency",
    }
    for n in doc["nodes"]:
        assert required <= set(n)
        assert all(isinstance(n[k], int) for k in required - {"name", "max_concurrency"})
        assert isinstance(n["max_concurrency"], float)


def test_gated_model_without_token_is_a_warning_with_the_remedy() -> None:
    from spark_tui.core.fit import check_fit
    from spark_tui.core.model_facts import resolve_model_facts
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.core.render import render_argv, render_env

    recipe = find_recipe("llama-3.3-70b-instruct-tp2")
    assert recipe.metadata.get("gated")
    argv = render_argv(recipe, apply_overrides(recipe, []))
    nodes = [node(f"spark-{i}") for i in range(2)]
    facts = resolve_model_facts(recipe, nodes)
    codes = lambda r: {f.code for f in r.findings}  # noqa: E731
    without = check_fit(recipe, argv, render_env(recipe), nodes, facts, hf_token_set=False)
    assert "gated_model" in codes(without)
    assert without.verdict in ("fits_with_warnings", "does_not_fit")
    withtoken = check_fit(recipe, argv, render_env(recipe), nodes, facts, hf_token_set=True)
    assert "gated_model" not in codes(withtoken)
    unknown = check_fit(recipe, argv, render_env(recipe), nodes, facts)
    assert "gated_model" not in codes(unknown)


def test_max_seq_len_remedy_reads_well_and_stays_within_the_models_positions() -> None:
    # 1M tokens on a 131072-position model (allowed knowingly): no utilization holds it, nor
    # does an fp8 KV cache (76 GiB a rank), so the remedy offers a length only, the model's
    # own limit.
    r = check_fit(
        recipe(),
        argv("-tp 2 --max-model-len 1000000"),
        {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
        [node("a"), node("b")],
        llama70b(),
    )
    f = finding(r, "kv_max_seq_len")
    assert "or ," not in f.remedy and ", ," not in f.remedy and not f.remedy.endswith("or ")
    assert f.remedy == "--set max_model_len=131072"

"""Flags, catalogue and memory rules of the simulated engine, without starting it."""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import pytest
from engine_harness import recipe_argv

from spark_tui.sim.engine import catalogue, flags
from spark_tui.sim.engine import memory as mem
from spark_tui.sim.engine.settings import SimSettings

ENGINE_DIR = Path(__file__).resolve().parents[2] / "spark_tui" / "sim" / "engine"
RECIPES = [
    "glm-5.3-flash",
    "qwen3.8-flash-next",
    "gpt-oss-120b",
    "nemotron-3-nano-30b-a3b-nvfp4",
    "qwen3.6-35b-a3b-nvfp4",
    "llama-3.3-70b-instruct-tp2",
]
GIB = 2**30


def test_engine_imports_only_the_standard_library() -> None:
    # Ray only on the Ray path, imported there lazily (a Ray image has it; others never ask).
    allowed = set(sys.stdlib_module_names) | {"spark_tui", "ray"}
    for path in ENGINE_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"
                if name.startswith("spark_tui"):
                    assert name.startswith("spark_tui.sim.engine"), f"{path.name} imports {name}"


def test_human_readable_int_follows_vllm() -> None:
    assert flags.human_readable_int("3G") == 3 * 2**30
    assert flags.human_readable_int("25.6k") == 25600
    assert flags.human_readable_int("4096") == 4096
    with pytest.raises(argparse.ArgumentTypeError):
        flags.human_readable_int("1.5G")


@pytest.mark.parametrize("name", RECIPES)
def test_every_bundled_recipe_parses(name: str) -> None:
    argv, _env = recipe_argv(name)
    args = flags.parse(argv)
    assert args.subparser == "serve"
    assert catalogue.lookup(args.model) is not None, args.model


def test_seed_flags_parse() -> None:
    args = flags.parse(
        [
            "serve",
            "QuantTrio/MiniMax-M2-AWQ",
            "--port",
            "8000",
            "--host",
            "0.0.0.0",
            "--gpu-memory-utilization",
            "0.7",
            "-tp",
            "2",
            "--distributed-executor-backend",
            "ray",
            "--max-model-len",
            "128000",
            "--load-format",
            "fastsafetensors",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "minimax_m2",
            "--reasoning-parser",
            "minimax_m2_append_think",
            "--data-parallel-size",
            "2",
            "--data-parallel-rank",
            "1",
            "--data-parallel-address",
            "10.0.0.1",
            "--data-parallel-rpc-port",
            "13345",
            "--no-enable-prefix-caching",
            "--kv_cache_dtype=fp8",
        ]
    )
    assert args.tensor_parallel_size == 2 and args.enable_prefix_caching is False
    assert args.kv_cache_dtype == "fp8" and args.data_parallel_rpc_port == 13345


def test_non_default_args_line() -> None:
    argv, _ = recipe_argv("qwen3.8-flash-next")
    nd = flags.non_default_args(flags.parse(argv))
    keys = list(nd)
    assert keys[:1] == ["model_tag"] and "model" in keys
    assert nd["kv_cache_memory_bytes"] == 3 * 2**30
    assert nd["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 4}
    assert nd["enable_flashinfer_autotune"] is False
    assert "port" not in nd  # 8000 is vLLM's default
    assert keys.index("host") < keys.index("model") < keys.index("tensor_parallel_size")


def _sizes(*flag_words: str, max_len: int = 32768) -> tuple[int, int]:
    return mem.scheduler_sizes(flags.parse(["serve", "Qwen/Qwen3-8B", *flag_words]), max_len)


def test_scheduler_sizes_settle_as_vllm_does() -> None:
    """vLLM 0.32's arg_utils: a defaulted max_num_seqs is lowered to the budget given, a
    defaulted budget is capped at max_num_seqs x max_model_len; two sizes given stay (the
    SchedulerConfig refuses them later)."""
    assert _sizes() == (8192, 256)
    assert _sizes("--max-num-batched-tokens", "128") == (128, 128)
    assert _sizes("--max-num-batched-tokens", "4096") == (4096, 256)
    assert _sizes("--max-num-seqs", "10000") == (8192, 10000)
    assert _sizes("--max-num-seqs", "512", "--max-num-batched-tokens", "256") == (256, 512)
    assert _sizes("--max-num-seqs", "2", max_len=1024) == (2048, 2)
    assert _sizes("--no-enable-chunked-prefill", max_len=32768) == (32768, 256)
    assert _sizes("--performance-mode", "throughput") == (16384, 512)
    args = flags.parse(["serve", "Qwen/Qwen3-8B", "--max-num-batched-tokens", "64"])
    spec = catalogue.lookup(args.model)
    assert spec is not None
    lay = mem.layout_from_args(args, spec, {})
    assert (lay.max_num_batched_tokens, lay.max_num_seqs) == (64, 64)


def _plan(name: str, **env: str) -> mem.MemoryPlan:
    argv, renv = recipe_argv(name)
    args = flags.parse(argv)
    spec = catalogue.lookup(args.model)
    assert spec is not None
    full_env = {**renv, **env}
    lay = mem.layout_from_args(args, spec, full_env)
    return mem.plan_memory(spec, lay, mem.NodeView.from_settings(SimSettings.from_env(full_env)))


def test_glm_on_two_128gb_sparks_matches_the_cockpit_story() -> None:
    p = _plan("glm-5.3-flash")
    assert abs(p.weights / GIB - 58.1) < 0.05
    assert 30 < p.kv_bytes / GIB < 35
    assert abs(p.request_bytes / GIB - 12.0) < 0.2
    assert 2.5 < p.max_concurrency < 3.0
    small = _plan("glm-5.3-flash", SPARK_SIM_MEM_TOTAL_BYTES="64000000000")
    assert small.weights + mem.CUDA_CONTEXT_BYTES > small.free  # OOM while loading
    assert small.kv_bytes < 0


def test_qwen38_ple_on_disk_fits_64gb() -> None:
    p = _plan("qwen3.8-flash-next", SPARK_SIM_MEM_TOTAL_BYTES="64000000000")
    assert 37 < p.weights / GIB < 40
    assert p.free >= p.requested
    assert p.weights + p.overhead + p.kv_bytes < p.free
    assert p.kv_bytes == 3 * 2**30 and p.request_bytes <= p.kv_bytes
    in_memory = _plan(
        "qwen3.8-flash-next", SPARK_SIM_MEM_TOTAL_BYTES="64000000000", VLLM_PLE_TABLE_MEMORY="gpu"
    )
    assert abs(in_memory.weights / GIB - 63.13) < 0.05  # the logged TP2 load of the NVFP4 sibling
    assert in_memory.weights > in_memory.free


def test_heads_divide_tp2_not_tp3() -> None:
    for model in ("nvidia/GLM-5.3-Flash-FP4-Local", "nvidia/Qwen3.8-Flash-Next-FP4-Local"):
        spec = catalogue.lookup(model)
        assert spec is not None
        assert spec.num_attention_heads % 2 == 0 and spec.num_attention_heads % 3 != 0


def test_hf_cache_files_agree_with_the_catalogue() -> None:
    for model_id, spec in catalogue.CATALOGUE.items():
        cfg = catalogue.hf_config(model_id)
        assert cfg["num_hidden_layers"] == spec.num_hidden_layers
        assert cfg["num_attention_heads"] == spec.num_attention_heads
        assert cfg["max_position_embeddings"] == spec.max_position_embeddings
        assert cfg.get("spark_tui_simulated", False) == spec.simulated
        index = catalogue.safetensors_index(model_id)
        assert index["metadata"]["total_size"] == spec.weight_bytes
        files = set(index["weight_map"].values())
        assert len(files) == spec.num_shards
        shards = catalogue.shard_files(model_id)
        assert {n for n, _ in shards} == files
        assert sum(s for _, s in shards) == spec.weight_bytes
    glm = catalogue.hf_config("nvidia/GLM-5.3-Flash-FP4-Local")
    assert glm["kv_lora_rank"] == 512 and glm["qk_rope_head_dim"] == 64
    q = catalogue.hf_config("nvidia/Qwen3.8-Flash-Next-NVFP4")
    assert q["per_layer_embedding_table_bytes"] == round(47.7 * GIB)
    assert q["layer_types"].count("full_attention") == 20
    assert catalogue.lookup(
        "/cache/huggingface/hub/models--nvidia--Qwen3.8-Flash-Next-NVFP4/snapshots/fc694b54"
    ) is catalogue.lookup("nvidia/Qwen3.8-Flash-Next-FP4-Local")


def test_reference_log_numbers_are_reproduced() -> None:
    """The Qwen3.8 NVFP4 TP2 run on two 128 GB Sparks (vllm_multinode_tp2_head_rank0.log)."""
    args = flags.parse(
        [
            "serve",
            "nvidia/Qwen3.8-Flash-Next-NVFP4",
            "-tp",
            "2",
            "--nnodes",
            "2",
            "--gpu-memory-utilization",
            "0.7",
            "--kv-cache-dtype",
            "fp8_e4m3",
            "--max-num-batched-tokens",
            "4096",
            "--max-model-len",
            "262144",
        ]
    )
    spec = catalogue.lookup(args.model)
    assert spec is not None
    lay = mem.layout_from_args(args, spec, {})
    p = mem.plan_memory(spec, lay, mem.NodeView.from_settings(SimSettings.from_env({})))
    assert mem.format_gib(p.total) == "121.69"
    assert (
        mem.format_gib(p.requested) == "85.18"
    )  # "Desired GPU memory utilization is (0.7, 85.18 GiB)"
    assert mem.format_gib(p.weights) == "63.13"
    assert abs(p.kv_bytes / GIB - 21.47) / 21.47 < 0.10
    assert abs(p.kv_tokens - 2_318_574) / 2_318_574 < 0.15


def test_a_dead_peer_is_seen_at_once_without_the_reader_thread() -> None:
    """A request right after a worker's death must fail as on real vLLM (its collective
    does): the head looks at the connection itself, before its reader thread noticed."""
    import socket as socket_mod

    from spark_tui.sim.engine.rendezvous import Link

    mine, theirs = socket_mod.socketpair()
    mine.settimeout(5)  # as the reader sets it: a look must not wait for it
    link = Link(mine, 1, "rank1@w", lambda *_: None, lambda *_: None, silence_timeout=60)
    try:
        assert not link.gone()
        theirs.sendall(b'{"type": "ping"}\n')
        assert not link.gone(), "unread data is a live peer"
        mine.recv(64)
        theirs.close()
        assert link.gone()
        link.close()  # a goodbye (shutdown) is not a loss
        assert not link.gone()
    finally:
        mine.close()

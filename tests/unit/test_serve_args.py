"""parse_serve_args: a rendered `vllm serve` argv read as vLLM's argument parser reads it."""

from __future__ import annotations

import shlex

import pytest

from spark_tui.core.errors import InputError
from spark_tui.core.serve_args import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    ServeArgs,
    human_readable_int,
    parse_serve_args,
)

# The Qwen3.8 command of the playbook (seed 004), with the rank flags the plan adds.
QWEN_CMD = """vllm serve nvidia/Qwen3.8-Flash-Next-FP4-Local --host 0.0.0.0 --port 8000
 --trust-remote-code --tensor-parallel-size 2 --mamba-cache-mode align --enable-prefix-caching
 --enable-chunked-prefill --dtype bfloat16 --kv-cache-dtype fp8 --quantization modelopt_mixed
 --block-size 16 --load-format b12x --max-model-len 262144 --max-num-seqs 8
 --max-num-batched-tokens 2048
 --speculative-config '{"method":"mtp","num_speculative_tokens":4}'
 --gdn-decode-kernel b12x --no-enable-flashinfer-autotune --reasoning-parser qwen3
 --tool-call-parser qwen3_xml --enable-auto-tool-choice --gpu-memory-utilization 0.8
 --kv-cache-memory-bytes 3G --nnodes 2 --master-addr 192.168.100.10 --master-port 29501
 --node-rank 1 --headless"""


def parse(cmd: str) -> ServeArgs:
    return parse_serve_args(shlex.split(cmd))


def test_playbook_qwen_command() -> None:
    a = parse(QWEN_CMD)
    assert a.model == "nvidia/Qwen3.8-Flash-Next-FP4-Local"
    assert (a.tensor_parallel_size, a.pipeline_parallel_size, a.data_parallel_size) == (2, 1, 1)
    assert a.world_size == 2
    assert a.gpu_memory_utilization == 0.8 and a.has("gpu-memory-utilization")
    assert a.max_model_len == 262144
    assert a.kv_cache_dtype == "fp8" and a.dtype == "bfloat16"
    assert a.kv_cache_memory_bytes == 3 * 2**30
    assert (a.max_num_seqs, a.max_num_batched_tokens, a.block_size) == (8, 2048, 16)
    assert a.enable_prefix_caching is True
    assert a.speculative_config == {"method": "mtp", "num_speculative_tokens": 4}
    assert a.quantization == "modelopt_mixed"
    assert (a.tool_call_parser, a.reasoning_parser, a.enable_auto_tool_choice) == (
        "qwen3_xml",
        "qwen3",
        True,
    )
    assert (a.host, a.port) == ("0.0.0.0", 8000)
    assert (a.nnodes, a.node_rank, a.master_addr, a.master_port, a.headless) == (
        2,
        1,
        "192.168.100.10",
        29501,
        True,
    )
    # Everything raw, under canonical long names, including what is not modelled.
    assert a.flags["--mamba-cache-mode"] == "align"
    assert a.flags["--no-enable-flashinfer-autotune"] is None
    assert a.flags["--trust-remote-code"] is None
    assert a.has("gdn-decode-kernel") and a.has("--load-format") and not a.has("enforce-eager")


def test_equals_form_and_underscores_and_short_aliases() -> None:
    a = parse(
        "vllm serve m --tensor_parallel_size=4 -pp=2 --max-model-len=32k "
        "--gpu-memory-utilization=0.87 --kv-cache-dtype=fp8_e4m3 --port=9000"
    )
    assert (a.tensor_parallel_size, a.pipeline_parallel_size) == (4, 2)
    assert a.max_model_len == 32000  # lowercase k is decimal in vLLM
    assert a.gpu_memory_utilization == 0.87
    assert a.kv_cache_dtype == "fp8_e4m3"
    assert a.port == 9000
    b = parse("vllm serve m -tp 2 -dp 3 -q fp8")
    assert (b.tensor_parallel_size, b.data_parallel_size, b.quantization) == (2, 3, "fp8")


def test_vllm_human_readable_sizes() -> None:
    # vLLM's human_readable_int: lowercase decimal, uppercase binary, no decimals with binary.
    assert human_readable_int("3G") == 3 * 2**30
    assert human_readable_int("3g") == 3 * 10**9
    assert human_readable_int("25.6k") == 25600
    assert human_readable_int("1K") == 1024
    assert human_readable_int("4096") == 4096
    with pytest.raises(ValueError, match="decimals are not allowed"):
        human_readable_int("1.5G")
    assert parse("vllm serve m --kv-cache-memory-bytes 3g").kv_cache_memory_bytes == 3 * 10**9
    # vLLM's own memory report spells the flag --kv-cache-memory (an argparse prefix).
    assert parse("vllm serve m --kv-cache-memory=22892212122").kv_cache_memory_bytes == 22892212122


def test_negated_booleans_and_later_flags_win() -> None:
    a = parse("vllm serve m --enable-prefix-caching --no-enable-prefix-caching")
    assert a.enable_prefix_caching is False
    b = parse("vllm serve m --no-enable-prefix-caching --enable-prefix-caching")
    assert b.enable_prefix_caching is True
    c = parse("vllm serve m --max-num-seqs 4 --max-num-seqs 16")
    assert c.max_num_seqs == 16


def test_defaults_match_vllm() -> None:
    a = parse("vllm serve Qwen/Qwen3-0.6B")
    assert a.gpu_memory_utilization == DEFAULT_GPU_MEMORY_UTILIZATION == 0.92
    assert not a.has("gpu-memory-utilization")
    assert a.max_model_len is None  # the model's own maximum
    assert a.kv_cache_dtype == "auto" and a.dtype == "auto"
    assert a.kv_cache_memory_bytes is None
    assert (a.port, a.nnodes, a.node_rank, a.headless) == (8000, 1, 0, False)
    assert a.flags == {}


def test_max_model_len_auto_means_model_maximum() -> None:
    assert parse("vllm serve m --max-model-len auto").max_model_len is None
    assert parse("vllm serve m --max-model-len -1").max_model_len is None
    assert parse("vllm serve m --max-model-len 128K").max_model_len == 131072


def test_multi_value_and_dotted_json_flags() -> None:
    a = parse(
        "vllm serve m --served-model-name a b --speculative-config.method mtp "
        "--speculative-config.num_speculative_tokens 5 --port 1"
    )
    assert a.served_model_name == ["a", "b"]
    assert a.speculative_config == {"method": "mtp", "num_speculative_tokens": 5}
    assert a.port == 1


def test_model_from_flag_and_without_vllm_prefix() -> None:
    assert parse("vllm serve --model org/name --port 1").model == "org/name"
    assert parse_serve_args(["org/name", "--port", "1"]).model == "org/name"
    # A boolean flag before the model does not swallow it.
    assert parse("vllm serve --trust-remote-code org/name").model == "org/name"


@pytest.mark.parametrize(
    ("cmd", "fragment"),
    [
        ("vllm serve m --gpu-memory-utilization 1.5", "--gpu-memory-utilization"),
        ("vllm serve m --gpu-memory-utilization 0", "--gpu-memory-utilization"),
        ("vllm serve m --tensor-parallel-size two", "--tensor-parallel-size"),
        ("vllm serve m --tensor-parallel-size 0", "--tensor-parallel-size"),
        ("vllm serve m --kv-cache-memory-bytes 1.5G", "--kv-cache-memory-bytes"),
        ("vllm serve m --speculative-config '[1, 2]'", "--speculative-config"),
        ("vllm serve m --speculative-config '{bad'", "--speculative-config"),
        ("vllm serve", "no model"),
    ],
)
def test_bad_values_are_input_errors(cmd: str, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse(cmd)
    assert fragment in err.value.message
    assert err.value.remedy


def test_reads_the_rendered_bundled_glm_recipe() -> None:
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.core.render import render_argv

    recipe = find_recipe("glm-5.3-flash")
    a = parse_serve_args(render_argv(recipe, apply_overrides(recipe, ["tensor_parallel=3"])))
    assert a.model == "nvidia/GLM-5.3-Flash-FP4-Local"
    assert a.tensor_parallel_size == 3
    assert a.gpu_memory_utilization == 0.87
    assert a.max_model_len == 500000 and a.block_size == 256
    assert a.speculative_config is not None and a.speculative_config["method"] == "mtp"

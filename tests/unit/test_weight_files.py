"""The files a sync fetches are the ones vLLM's loader reads: shards the index names, the
preferred format only, never `original/` nor other frameworks' weights."""

from __future__ import annotations

from spark_tui.core.weight_files import files_vllm_reads

LLAMA_LIKE = [
    ".gitattributes",
    "README.md",
    "config.json",
    "generation_config.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
    "model.safetensors.index.json",
    "consolidated.safetensors",
    "params.json",
    "pytorch_model-00001-of-00002.bin",
    "pytorch_model-00002-of-00002.bin",
    "pytorch_model.bin.index.json",
    "original/consolidated.00.pth",
    "original/params.json",
    "original/tokenizer.model",
    "onnx/model.onnx",
    "flax_model.msgpack",
    "tf_model.h5",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
]
SHARDS = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}


def test_the_indexed_safetensors_shards_and_the_small_files_only() -> None:
    got = files_vllm_reads(LLAMA_LIKE, SHARDS)
    assert got == sorted(
        [
            ".gitattributes",
            "README.md",
            "config.json",
            "generation_config.json",
            *SHARDS,
            "model.safetensors.index.json",
            "params.json",
            "pytorch_model.bin.index.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
            "chat_template.jinja",
        ]
    )


def test_without_the_index_read_every_top_level_safetensors_file_counts() -> None:
    got = files_vllm_reads(LLAMA_LIKE)
    assert "consolidated.safetensors" in got and SHARDS <= set(got)
    assert not any(n.endswith(".bin") or n.startswith("original/") for n in got)


def test_a_repo_of_bin_files_only_keeps_them() -> None:
    names = ["config.json", "pytorch_model.bin", "tokenizer.json", "original/x.pth"]
    assert files_vllm_reads(names) == ["config.json", "pytorch_model.bin", "tokenizer.json"]


def test_the_mistral_load_format_reads_the_consolidated_file() -> None:
    got = files_vllm_reads(LLAMA_LIKE, SHARDS, load_format="mistral")
    weights = [n for n in got if n.endswith((".safetensors", ".bin", ".pth"))]
    assert weights == ["consolidated.safetensors"]
    assert "params.json" in got


def test_a_load_format_we_do_not_know_keeps_every_weight_file() -> None:
    got = files_vllm_reads(LLAMA_LIKE, SHARDS, load_format="runai_streamer")
    assert SHARDS <= set(got) and "consolidated.safetensors" in got
    assert "pytorch_model-00001-of-00002.bin" in got
    assert "original/consolidated.00.pth" not in got

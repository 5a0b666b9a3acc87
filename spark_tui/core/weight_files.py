"""Which files of a model repository vLLM reads, so a sync fetches those and no others.

vLLM's default loader (`--load-format auto`) takes the safetensors weights when the repo has
any, else the PyTorch `.bin` files, else `.pt`; with a safetensors index it loads only the
shards the index's weight map names (a repo may also carry a `consolidated.safetensors` of
the same weights); it never reads `original/` (the vendor's own checkpoint) nor the weights
of other frameworks (Flax, TensorFlow, ONNX, Core ML, OpenVINO, GGUF). Everything else
(config, tokenizer, chat template, generation config, processor files) is small and may be
read by the model's code, so it is kept.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable

# Never read by vLLM's default loader; fetching them costs disk and time only.
UNUSED_PATTERNS = (
    "original/*",
    "*.onnx",
    "*.onnx_data",
    "onnx/*",
    "openvino/*",
    "coreml/*",
    "*.mlmodel",
    "*.tflite",
    "*.gguf",
    "*.msgpack",
    "*.h5",
    "*.ot",
)
# The weight formats in the order vLLM prefers them: the first one the repo has wins.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
INDEX = "model.safetensors.index.json"


def _unused(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in UNUSED_PATTERNS)


def _weight_suffix(name: str) -> str | None:
    for suffix in WEIGHT_SUFFIXES:
        if name.endswith(suffix):
            return suffix
    return None


def files_vllm_reads(
    names: Iterable[str],
    weight_map: Collection[str] | None = None,
    load_format: str | None = None,
) -> list[str]:
    """The files of `names` (a repo's file list) that vLLM reads, sorted.

    `weight_map` is the set of shard names the safetensors index maps tensors to (None when
    the repo has no index or it was not read): then every top-level safetensors file counts.
    `load_format` is the recipe's `--load-format` (None: auto). With `mistral` vLLM reads the
    `consolidated*.safetensors` files; with a format whose files we do not know, every weight
    file is kept rather than guessed away.
    """
    kept = [n for n in names if not _unused(n)]
    weights = {n: s for n in kept if (s := _weight_suffix(n)) is not None}
    fmt = (load_format or "auto").lower()
    if fmt == "mistral":
        wanted = {n for n in weights if fnmatch.fnmatch(n, "consolidated*.safetensors")}
    elif fmt in ("auto", "safetensors", "pt"):
        order: tuple[str, ...] = {"pt": (".bin", ".pt"), "safetensors": (".safetensors",)}.get(
            fmt, WEIGHT_SUFFIXES
        )
        chosen = next((s for s in order if s in weights.values()), None)
        wanted = {
            n
            for n, suffix in weights.items()
            if suffix == chosen and (suffix != ".safetensors" or not weight_map or n in weight_map)
        }
    else:
        wanted = set(weights)
    return sorted(n for n in kept if n not in weights or n in wanted)

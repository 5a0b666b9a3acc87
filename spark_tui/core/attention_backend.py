"""Which attention backend vLLM runs a model with, where the choice changes its memory.

vLLM takes the backend `--attention-backend` (or VLLM_ATTENTION_BACKEND) names; otherwise
it picks the first that supports the model and the KV cache. On a GB10 (sm121) FlashAttention
2 keeps no fp8 or NVFP4 KV cache, so a quantised KV cache goes to FlashInfer (its logs:
"Using FLASHINFER attention backend out of potential backends: ['FLASHINFER', 'TRITON_ATTN']"),
unless the model's layers differ in head size: vLLM then forces Triton for all of them
(Gemma 4: "heterogeneous head dimensions ... Forcing TRITON_ATTN backend").
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_tui.core.facts import ModelFacts
from spark_tui.core.model_facts import effective_head_dim
from spark_tui.core.serve_args import ServeArgs

FLASHINFER = "FLASHINFER"
BACKEND_ENV = "VLLM_ATTENTION_BACKEND"
# vLLM's FlashInferBackend.get_supported_head_sizes.
FLASHINFER_HEAD_SIZES = (64, 128, 256)
QUANTISED_KV_PREFIXES = ("fp8", "nvfp4")


def attention_backend(
    args: ServeArgs, facts: ModelFacts | None, env: Mapping[str, str], *, unified: bool
) -> str | None:
    """The backend's name (upper case) as named or as vLLM picks it on a GB10 (`unified`);
    None for vLLM's default pick where it holds no memory of its own worth counting."""
    named = args.flags.get("--attention-backend") or env.get(BACKEND_ENV)
    if named:
        return str(named).strip().upper()
    kv = (args.kv_cache_dtype or "auto").lower()
    if not unified or not kv.startswith(QUANTISED_KV_PREFIXES) or facts is None:
        return None
    head = effective_head_dim(facts)
    if facts.attention == "mla" or head not in FLASHINFER_HEAD_SIZES:
        return None
    if facts.global_head_dim is not None and facts.global_head_dim != head:
        return None  # mixed head sizes: vLLM forces Triton
    return FLASHINFER

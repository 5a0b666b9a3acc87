"""How the simulated engine decides what fits in one rank's memory (its own rules: it never
imports the fit validator, it is the world the validator is checked against).

Model, per rank, following vLLM V1's order:
1. CUDA's view of the node: GB10 reports 121.69 GiB total where /proc/meminfo says 119.63 GiB
   (vllm_multinode_tp2_*.log, vllm_fail_free_memory_less_than_util_gb10.txt vs free_b_gb10.txt),
   so total and free are meminfo x CUDA_UMA_FACTOR. Free = (MemAvailable - page cache) x factor.
2. Startup check: free >= gpu_memory_utilization x total, else vLLM's "Free memory on device".
3. Weights per rank = (checkpoint - replicated - PLE) / (TP x PP) + replicated
   + PLE / TP unless VLLM_PLE_TABLE_MEMORY=disk (+ a speculative draft model's weights).
   Weights above free - CUDA context -> torch.OutOfMemoryError while loading.
4. Profiling overhead = non-torch (CUDA context 0.45 GiB, +0.35 GiB NCCL/RoCE buffers when
   world > 1) + peak activation (max_num_batched_tokens x model activation bytes/token)
   + CUDA graphs (0.25 GiB, 0 with --enforce-eager).
5. KV cache = --kv-cache-memory-bytes if given, else util x total - weights - overhead;
   <= 0 -> "No available memory for the cache blocks".
6. KV bytes per token per rank: full and sliding layers x 2 (K,V) x KV heads/TP (at least 1)
   x head dim x dtype bytes; MLA layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes,
   not split by TP. One request of length L needs full layers x L + sliding layers
   x min(L, window + block) tokens, plus linear (Mamba / Gated DeltaNet) state per sequence.
   A request at max_model_len that does not fit -> vLLM's max seq len message with the
   estimated maximum model length.
7. "GPU KV cache size" = KV bytes / bytes per token (rounded down to the block size);
   "Maximum concurrency" = KV bytes / one max-length request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_tui.sim.engine.catalogue import GIB, ModelSpec, lookup
from spark_tui.sim.engine.settings import SimSettings

CUDA_UMA_FACTOR = 121.69 * GIB / 128452014080  # CUDA total / MemTotal on GB10
CUDA_CONTEXT_BYTES = int(0.45 * GIB)
NCCL_BUFFER_BYTES = int(0.35 * GIB)
CUDA_GRAPH_BYTES = int(0.25 * GIB)
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 256


def scheduler_sizes(args: Any, max_model_len: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) as vLLM 0.32 settles them on a GB10 API server
    (engine/arg_utils.py, _set_default_max_num_seqs_and_batched_tokens_args): a size the
    command does not give takes the device's default (doubled with --performance-mode
    throughput); a defaulted token budget is at least max_model_len without chunked prefill
    and at most max_num_seqs x max_model_len; a defaulted max_num_seqs is lowered to the
    token budget. Two sizes given stay as they are: SchedulerConfig then refuses a budget
    below the sequences."""
    doubled = 2 if getattr(args, "performance_mode", None) == "throughput" else 1
    given_batched, given_seqs = args.max_num_batched_tokens, args.max_num_seqs
    batched = DEFAULT_MAX_NUM_BATCHED_TOKENS * doubled
    seqs = DEFAULT_MAX_NUM_SEQS * doubled if given_seqs is None else given_seqs
    if given_batched is not None:
        batched = given_batched
    else:
        if getattr(args, "enable_chunked_prefill", None) is False:
            batched = max(max_model_len, batched)
        batched = min(seqs * max_model_len, batched)
    if given_seqs is None:
        seqs = min(seqs, batched)
    return batched, seqs


def format_gib(n_bytes: float) -> str:
    """vLLM's format_gib: GiB rounded to 2 decimals ('48.5', '22.83')."""
    return str(round(n_bytes / GIB, 2))


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str) -> int:
    """Bytes per KV element for --kv-cache-dtype."""
    if kv_cache_dtype.startswith("fp8"):
        return 1
    if kv_cache_dtype in ("float32", "float"):
        return 4
    if kv_cache_dtype == "auto" and model_dtype in ("float32", "float"):
        return 4
    return 2


def block_size_for(spec: ModelSpec, block_size: int | None) -> int:
    """The KV block size: the flag, else 64 for MLA (FlashMLA) and 16 otherwise."""
    if block_size:
        return block_size
    return 64 if spec.attention == "mla" else 16


def per_layer_token_bytes(spec: ModelSpec, tp: int, dtype_bytes: int) -> int:
    """KV bytes one attention layer keeps per token on one rank."""
    if spec.attention == "mla":
        return (spec.kv_lora_rank + spec.qk_rope_head_dim) * dtype_bytes
    kv_heads = max(1, spec.num_key_value_heads // tp)
    return 2 * kv_heads * spec.head_dim * dtype_bytes


def kv_bytes_per_token(spec: ModelSpec, tp: int, dtype_bytes: int) -> int:
    """KV bytes per token per rank over every attention layer (the 'GPU KV cache size' unit)."""
    layers = spec.full_attention_layers + spec.sliding_window_layers
    return layers * per_layer_token_bytes(spec, tp, dtype_bytes)


def request_kv_bytes(spec: ModelSpec, tp: int, dtype_bytes: int, length: int, block: int) -> int:
    """KV bytes one request of `length` tokens needs on one rank."""
    tokens = int(math.ceil(length / block)) * block
    per_layer = per_layer_token_bytes(spec, tp, dtype_bytes)
    total = spec.full_attention_layers * tokens * per_layer
    if spec.sliding_window_layers:
        window = min(tokens, (spec.sliding_window or tokens) + block)
        total += spec.sliding_window_layers * window * per_layer
    if spec.linear_layers:
        total += spec.linear_layers * spec.linear_state_bytes // max(1, tp)
    return total


def max_model_len_for(spec: ModelSpec, tp: int, dtype_bytes: int, kv_bytes: int, block: int) -> int:
    """The longest request (a multiple of the block size) that fits `kv_bytes`."""
    lo, hi = 0, max(block, spec.max_position_embeddings * 4)
    while hi - lo > block:
        mid = (lo + hi) // 2 // block * block
        if mid <= lo:
            break
        if request_kv_bytes(spec, tp, dtype_bytes, mid, block) <= kv_bytes:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass
class Layout:
    """The parallel layout and the memory-relevant flags of one launch."""

    tp: int
    pp: int
    dp: int
    nnodes: int
    util: float
    kv_cache_memory_bytes: int | None
    kv_dtype_bytes: int
    kv_cache_dtype: str
    block: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    enforce_eager: bool
    ple_on_disk: bool
    draft: ModelSpec | None
    num_speculative_tokens: int
    spec_method: str | None

    @property
    def world(self) -> int:
        """Ranks in one tensor/pipeline-parallel group."""
        return self.tp * self.pp


def layout_from_args(args: Any, spec: ModelSpec, env: Mapping[str, str]) -> Layout:
    """The Layout for parsed serve flags, with vLLM's defaults filled in."""
    spec_cfg: dict[str, Any] = args.speculative_config or {}
    draft = None
    draft_model = spec_cfg.get("model")
    if isinstance(draft_model, str):
        draft = lookup(draft_model)
    max_len = args.max_model_len
    if max_len is None or max_len < 0:
        max_len = spec.max_position_embeddings
    batched, seqs = scheduler_sizes(args, max_len)
    return Layout(
        tp=args.tensor_parallel_size,
        pp=args.pipeline_parallel_size,
        dp=args.data_parallel_size,
        nnodes=args.nnodes,
        util=args.gpu_memory_utilization,
        kv_cache_memory_bytes=args.kv_cache_memory_bytes,
        kv_dtype_bytes=kv_dtype_bytes(args.kv_cache_dtype, spec.dtype),
        kv_cache_dtype=args.kv_cache_dtype,
        block=block_size_for(spec, args.block_size),
        max_model_len=max_len,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        enforce_eager=bool(args.enforce_eager),
        ple_on_disk=env.get("VLLM_PLE_TABLE_MEMORY", "").strip().lower() == "disk",
        draft=draft,
        num_speculative_tokens=int(spec_cfg.get("num_speculative_tokens") or 0),
        spec_method=spec_cfg.get("method"),
    )


def weights_per_rank(spec: ModelSpec, lay: Layout) -> int:
    """Bytes of weights one rank loads."""
    sharded = spec.weight_bytes - spec.replicated_bytes - spec.ple_bytes
    total = sharded / lay.world + spec.replicated_bytes
    if spec.ple_bytes and not lay.ple_on_disk:
        total += spec.ple_bytes / lay.tp
    if lay.draft is not None:
        total += lay.draft.weight_bytes / lay.tp
    return int(total)


@dataclass
class NodeView:
    """CUDA's view of this node's unified memory."""

    total: int
    free: int

    @classmethod
    def from_settings(cls, st: SimSettings) -> NodeView:
        """Scale meminfo's numbers to what cudaMemGetInfo reports on GB10."""
        return cls(
            total=int(st.mem_total * CUDA_UMA_FACTOR),
            free=int(st.free_for_cuda * CUDA_UMA_FACTOR),
        )


@dataclass
class MemoryPlan:
    """Every number the startup log prints about memory, for one rank."""

    total: int
    free: int
    requested: int
    weights: int
    non_torch: int
    activation: int
    cudagraph: int
    kv_bytes: int
    kv_per_token: int
    request_bytes: int
    kv_tokens: int
    max_concurrency: float
    block: int

    @property
    def overhead(self) -> int:
        """Memory the profile run finds besides weights and KV cache."""
        return self.non_torch + self.activation + self.cudagraph


def plan_memory(spec: ModelSpec, lay: Layout, node: NodeView) -> MemoryPlan:
    """Apply the module's rules; the caller checks each stage and fails as vLLM does."""
    requested = int(node.total * lay.util)
    weights = weights_per_rank(spec, lay)
    non_torch = CUDA_CONTEXT_BYTES + (NCCL_BUFFER_BYTES if lay.world > 1 else 0)
    activation = lay.max_num_batched_tokens * spec.activation_per_token
    cudagraph = 0 if lay.enforce_eager else CUDA_GRAPH_BYTES
    if lay.kv_cache_memory_bytes is not None:
        kv = lay.kv_cache_memory_bytes
    else:
        kv = requested - weights - non_torch - activation - cudagraph
    per_token = kv_bytes_per_token(spec, lay.tp, lay.kv_dtype_bytes)
    request = request_kv_bytes(spec, lay.tp, lay.kv_dtype_bytes, lay.max_model_len, lay.block)
    tokens = 0
    if kv > 0 and per_token > 0:
        tokens = kv // per_token // lay.block * lay.block
    concurrency = kv / request if kv > 0 and request > 0 else 0.0
    return MemoryPlan(
        total=node.total,
        free=node.free,
        requested=requested,
        weights=weights,
        non_torch=non_torch,
        activation=activation,
        cudagraph=cudagraph,
        kv_bytes=kv,
        kv_per_token=per_token,
        request_bytes=request,
        kv_tokens=tokens,
        max_concurrency=concurrency,
        block=lay.block,
    )

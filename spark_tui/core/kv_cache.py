"""The KV cache of one rank as vLLM lays it out: bytes per request, tokens, concurrency.

Follows vLLM v1's KV cache manager: one spec per kind of layer (full attention, sliding
window, MLA, Mamba / linear attention), page sizes unified across kinds, layers grouped
so every group holds the same number of layers, blocks shared across groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spark_tui.core.facts import ModelFacts
from spark_tui.core.model_facts import effective_head_dim, kv_cache_dtype_bytes
from spark_tui.core.serve_args import ServeArgs

DEFAULT_BLOCK_SIZE = 16  # vLLM CacheConfig.DEFAULT_BLOCK_SIZE
# vLLM's default scheduler token budget for the API server on GB10 (the gemma-4-31B log's
# compile range is (1, 2048) with no --max-num-batched-tokens).
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
# Attention kernels want block sizes in multiples of this when vLLM grows the block of a
# hybrid model so an attention page holds a whole Mamba state.
KERNEL_BLOCK_ALIGNMENT = 16
FP8_DS_MLA_BYTES_PER_TOKEN = 656  # DeepSeek's fp8 MLA cache layout: 512 + 4*4 + 64*2
ATTENTION_KINDS = ("full", "sliding", "mla")
# What "GPU KV cache size: N tokens" counts changed in vLLM 0.21: before, the blocks per
# group times the block size (num_blocks // groups * block_size), which undercounts a model
# with sliding-window or Mamba groups; since, max concurrency x max_model_len (the tokens of
# context the pool holds when every request is as long as allowed). vLLM 0.20.0 / 0.20.1 logs
# print the first (177,440 tokens at 35.75x of 8,192 for gemma-4-26B), 0.22 and 0.28 logs and
# the source builds after them the second (the gemma-4-12B log: 336,566 = 41.08 x 8,192).
TOKENS_AS_CONCURRENCY_SINCE = (0, 21)


@dataclass(frozen=True)
class LayerKind:
    """Layers of one kind on one rank: how many, bytes per token each, window or state."""

    kind: str  # "full" | "sliding" | "mla" | "linear"
    layers: int
    bytes_per_token: int = 0  # one layer, one token, this rank (0 for linear layers)
    window: int | None = None  # sliding layers
    state_bytes: int = 0  # linear layers: one sequence's state in one layer, this rank


@dataclass(frozen=True)
class KVLayout:
    """The KV cache of one rank: its layer kinds, block size and scheduler token budget."""

    kinds: tuple[LayerKind, ...]
    block_size: int = DEFAULT_BLOCK_SIZE
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS

    @property
    def attention(self) -> tuple[LayerKind, ...]:
        return tuple(k for k in self.kinds if k.kind in ATTENTION_KINDS and k.layers > 0)

    @property
    def linear(self) -> tuple[LayerKind, ...]:
        return tuple(k for k in self.kinds if k.kind == "linear" and k.layers > 0)

    def attention_block_size(self) -> int:
        """The attention block size after vLLM grows it for a hybrid model's Mamba state."""
        block = self.block_size
        if self.linear and self.attention:
            per_token = max(k.bytes_per_token for k in self.attention)
            state = max(k.state_bytes for k in self.linear)
            needed = KERNEL_BLOCK_ALIGNMENT * math.ceil(
                state / (KERNEL_BLOCK_ALIGNMENT * per_token)
            )
            block = max(block, needed)
        return block

    def _page(self, kind: LayerKind, block: int) -> int:
        if kind.kind == "linear":
            # vLLM pads the Mamba page to the attention page.
            return max(kind.state_bytes, self._attention_page(block))
        return block * kind.bytes_per_token

    def _attention_page(self, block: int) -> int:
        return max((block * k.bytes_per_token for k in self.attention), default=0)

    def _usage(self, kind: LayerKind, max_len: int, block: int, page: int) -> int:
        """vLLM's max_memory_usage_bytes of one layer for one request of max_len tokens."""
        if kind.kind == "linear":
            return page
        if kind.kind == "sliding" and kind.window:
            # The last window-1 tokens plus one scheduled chunk, plus one block because the
            # window need not start on a block boundary.
            tokens = min(kind.window - 1 + self.max_num_batched_tokens, max_len)
            return (math.ceil(tokens / block) + 1) * page
        return math.ceil(max_len / block) * page

    def request_bytes(self, max_len: int) -> int:
        """KV memory one request of max_len tokens needs on this rank (vLLM's startup check)."""
        block = self.attention_block_size()
        total = 0
        for kind in self.kinds:
            if kind.layers <= 0:
                continue
            page = self._page(kind, block)
            total += kind.layers * self._usage(kind, max_len, block, page)
        return total

    def max_len_for(self, budget: int, upper: int) -> int:
        """The longest request (<= upper) whose KV fits in budget: vLLM's estimated max length."""
        if budget <= 0 or self.request_bytes(1) > budget:
            return 0
        lo, hi = 1, upper
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.request_bytes(mid) <= budget:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _grouping(self) -> tuple[int, int, int]:
        """(unified page bytes, layers per group, number of groups) as vLLM groups layers."""
        block = self.attention_block_size()
        live = [k for k in self.kinds if k.layers > 0]
        page = max(self._page(k, block) for k in live)
        counts = [k.layers for k in live]
        group = min(counts)
        if max(counts) < group * 1.25:
            group = max(counts)  # fewer padding layers than extra groups
        groups = sum(math.ceil(n / group) for n in counts)
        return page, group, groups

    def attention_groups(self) -> int:
        """The KV cache groups that hold attention layers: vLLM gives each its own attention
        metadata builder (and so its own backend workspaces)."""
        if not self.attention:
            return 0
        _, group, _ = self._grouping()
        return sum(math.ceil(k.layers / group) for k in self.attention)

    def _kind_block(self, kind: LayerKind, page: int) -> int:
        """Tokens per block of an attention kind once its page is grown to the unified page."""
        return max(1, page // kind.bytes_per_token) if kind.bytes_per_token else page

    def num_blocks(self, budget: int) -> int:
        """Blocks vLLM allocates from a KV budget (each spans one layer of every group)."""
        if budget <= 0 or not self.kinds:
            return 0
        page, group, _ = self._grouping()
        return budget // (page * group)

    def tokens(self, budget: int) -> int:
        """The blocks of every group times the block size: "GPU KV cache size" before 0.21."""
        if budget <= 0 or not self.attention:
            return 0
        page, _, groups = self._grouping()
        smallest = min(self._kind_block(k, page) for k in self.attention)
        return self.num_blocks(budget) // groups * smallest

    def reported_tokens(
        self, budget: int, max_len: int, vllm_version: tuple[int, int] | None = None
    ) -> int:
        """vLLM's "GPU KV cache size: N tokens" line as the given vLLM version prints it
        (None: the current formula)."""
        if vllm_version is not None and vllm_version < TOKENS_AS_CONCURRENCY_SINCE:
            return self.tokens(budget)
        return int(self.max_concurrency(budget, max_len) * max_len)

    def blocks_per_request(self, max_len: int) -> int:
        """Blocks one request of max_len tokens takes across all groups."""
        page, group, _ = self._grouping()
        total = 0
        for kind in self.kinds:
            if kind.layers <= 0:
                continue
            block = self._kind_block(kind, page) if kind.kind != "linear" else page
            usage = self._usage(kind, max_len, block, page)
            total += math.ceil(kind.layers / group) * math.ceil(usage / page)
        return total

    def max_concurrency(self, budget: int, max_len: int) -> float:
        """vLLM's "Maximum concurrency for N tokens per request: Xx"."""
        per_request = self.blocks_per_request(max_len)
        if budget <= 0 or per_request <= 0:
            return 0.0
        return self.num_blocks(budget) / per_request


def _per_rank_heads(heads: int, tp: int) -> int:
    # vLLM replicates KV heads when there are fewer than TP ranks.
    return max(1, heads // tp)


def _uses_mtp(args: ServeArgs) -> bool:
    method = str((args.speculative_config or {}).get("method") or "").lower()
    return "mtp" in method


def layout_for(facts: ModelFacts, args: ServeArgs) -> KVLayout | None:
    """The KV layout of one rank for these facts and serve args, or None when facts lack it."""
    elem = kv_cache_dtype_bytes(facts, args)
    layers = facts.num_hidden_layers
    kind = facts.attention
    if elem is None or layers is None or kind is None:
        return None
    tp = max(1, args.tensor_parallel_size)
    pp = max(1, args.pipeline_parallel_size)
    dcp = max(1, args.decode_context_parallel_size)
    draft = (facts.mtp_layers or 0) if _uses_mtp(args) else 0

    def per_stage(n: int) -> int:
        return math.ceil(n / pp)

    def attention_bytes(heads: int | None, dim: int | None) -> int | None:
        if heads is None or dim is None:
            return None
        return math.ceil(2 * _per_rank_heads(heads, tp) * dim * elem / dcp)

    head_dim = effective_head_dim(facts)
    kinds: list[LayerKind] = []
    if kind == "mla":
        if facts.kv_lora_rank is None or facts.qk_rope_head_dim is None:
            return None
        if (args.kv_cache_dtype or "").lower() == "fp8_ds_mla":
            latent = FP8_DS_MLA_BYTES_PER_TOKEN
        else:
            # MLA caches one latent vector per token, the same on every TP rank.
            latent = math.ceil((facts.kv_lora_rank + facts.qk_rope_head_dim) * elem)
        kinds.append(LayerKind("mla", per_stage(layers) + draft, math.ceil(latent / dcp)))
    elif kind == "full":
        dense = attention_bytes(facts.num_key_value_heads, head_dim)
        if dense is None:
            return None
        kinds.append(LayerKind("full", per_stage(layers) + draft, dense))
    elif kind == "sliding_window":
        sliding = attention_bytes(facts.num_key_value_heads, head_dim)
        full = attention_bytes(
            facts.num_global_key_value_heads or facts.num_key_value_heads,
            facts.global_head_dim or head_dim,
        )
        if sliding is None or full is None:
            return None
        if facts.full_attention_layers is None or facts.sliding_window is None:
            return None
        n_full = facts.full_attention_layers
        kinds.append(LayerKind("full", per_stage(n_full) + draft, full))
        kinds.append(
            LayerKind("sliding", per_stage(layers - n_full), sliding, window=facts.sliding_window)
        )
    elif kind == "hybrid":
        attn = attention_bytes(facts.num_key_value_heads, head_dim)
        if attn is None or facts.full_attention_layers is None:
            return None
        if facts.linear_layers is None or facts.linear_state_bytes is None:
            return None
        kinds.append(LayerKind("full", per_stage(facts.full_attention_layers) + draft, attn))
        kinds.append(
            LayerKind(
                "linear",
                per_stage(facts.linear_layers),
                state_bytes=math.ceil(facts.linear_state_bytes / tp),
            )
        )
    else:
        return None
    return KVLayout(
        kinds=tuple(kinds),
        block_size=args.block_size or DEFAULT_BLOCK_SIZE,
        max_num_batched_tokens=args.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS,
    )

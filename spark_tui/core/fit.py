"""The fit validator: does a recipe's parallel layout match the nodes, and does each rank fit?"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spark_tui.core import prelaunch
from spark_tui.core.attention_backend import FLASHINFER, attention_backend
from spark_tui.core.errors import FactsError
from spark_tui.core.fact_ranges import check_fact_ranges
from spark_tui.core.facts import GIB, ModelFacts, NodeFacts
from spark_tui.core.kv_cache import DEFAULT_MAX_NUM_BATCHED_TOKENS, KVLayout, layout_for
from spark_tui.core.model_facts import ignored_metadata, missing_for_fit
from spark_tui.core.plan import undeclared_reference_error, undeclared_references
from spark_tui.core.recipe import Recipe
from spark_tui.core.render import placeholder_flags, uses_escapes
from spark_tui.core.selection import ON_FLAG, choice_text
from spark_tui.core.serve_args import ServeArgs, parse_serve_args
from spark_tui.core.serve_rules import data_parallel_refusals, refusals
from spark_tui.core.wording import plural

MIB = 1024**2

# What vLLM adds on top of the checkpoint when it loads it ("Model loading took X GiB" over
# "Checkpoint size: Y GiB"): 1.0247, 1.0089, 0.9942, 1.0093, 1.0218 and 1.0201 on the six
# GB10 / sm120 logs in the reference set; the median.
WEIGHT_LOAD_FACTOR = 1.015
# What a rank holds besides weights and KV cache, in the terms of vLLM's own accounting
# (gpu_worker.determine_available_memory): available KV = gpu_memory_utilization x total
# - weights - non-torch memory - peak activation of the profile run - CUDA graph estimate.
# Each term below is read off the reference GB10 logs; benchmarks/fit_accuracy.py prints
# the per-log error (all within 5 % of the logged "Available KV cache memory").
#
# The budget is util x the node's total, which on GB10 vLLM reads from cudaMemGetInfo: on
# this unified-memory part that is the kernel's MemTotal, and it differs between machines
# (119.63 GiB on one, 121.69 on another), so it is the node's own fact, never a constant.
#
# Non-torch memory: CUDA context, cuBLAS/NCCL workspaces. On GB10 vLLM measures it as total
# - psutil's available memory - torch's reserved memory (MemorySnapshot), so whatever else
# the host takes or frees between the worker's start and the end of the profile counts too:
# the TP2 log's own report ("consumed memory (weights + non-torch)") puts it at -0.6 / +0.6
# GiB on its two ranks, and two runs of one setting can differ by 2.5 GiB (three starts of
# gemma-3-27b with one model and budget on one machine measured 0.09 and 2.54 GiB compiled,
# 2.90 eager). No flag decides it, so where vLLM's own figure from an earlier start on the
# node is at hand, runtime_overhead takes it (measured_non_torch_bytes) in place of this
# estimate and the compile workers' below, which are part of what it measures.
NON_TORCH_BYTES = GIB // 2
# How far vLLM's own non-torch figure moves between starts of one setting on GB10 (measured
# host-wide, above), so how much smaller a start's KV cache can come out than predicted with
# nothing in the recipe to say so: the three gemma-3-27b starts with one model and budget on
# one machine measured 0.09, 2.54 and 2.90 GiB (the held-out logs), 2.81 GiB apart. A KV
# budget that holds one full-length request by less may not hold it at a given start (vLLM's
# "max seq len" refusal), and `max_model_len auto` may come out shorter by what it costs.
# It covers the other GB10 logs too: the TP2 log's two ranks of one run differ by 1.20 GiB,
# and every GB10 log's available KV is over-predicted by at most 2.79 GiB (the eager one).
NON_TORCH_SPREAD_BYTES = round((2.90 - 0.09) * GIB)
# torch.compile (Inductor) keeps a pool of compile workers alive through the profile; on a
# unified-memory GB10 their host memory counts as non-torch memory (above). Read off the
# four compiled fitted logs, each at its machine's total: they leave 1.5-4.4 GiB beyond
# weights, activation and graphs, and 3200 MiB is the least-squares fit of their relative
# errors; the TP2 log, with compilation off (mode NONE), leaves none.
COMPILE_WORKERS_BYTES = 3200 * MIB
# The profile run's forward pass over max_num_batched_tokens: 0.19 MiB per token fits the
# TP2 log's "1.14 GiB for peak activation" at 4096 tokens and the 65536-token DFlash log.
ACTIVATION_BYTES_PER_TOKEN = 192 * 1024
# The sampler's dummy run: float32 logits for every request, and with speculative
# decoding for every draft token as well (the rejection sampler's target logits).
LOGIT_BYTES = 4
# vLLM's scheduler defaults on GB10: 256 sequences (the logs' largest CUDA graph is
# min(2 x max_num_seqs x (1 + draft tokens), 512) = 512 without --max-num-seqs).
DEFAULT_MAX_NUM_SEQS = 256
MAX_CUDA_GRAPH_CAPTURE_SIZE = 512
# When the vocabulary is not known: the largest of the common Spark models (Gemma), so an
# unknown model's sampler is not under-counted.
DEFAULT_VOCAB_SIZE = 262144
# vLLM's estimate of the CUDA graph pool ("Estimated CUDA graph memory: X GiB"): 0.20 to
# 0.37 GiB on the dense logs at 512 captured tokens, 0.03 to 0.1 GiB at 48.
CUDA_GRAPH_BASE_BYTES = 48 * MIB
CUDA_GRAPH_BYTES_PER_CAPTURED_TOKEN = 640 * 1024
# With FlashInfer, each KV cache group's attention metadata builder allocates its float
# workspace (vLLM's VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE, 394 MiB) at the first graph
# capture, and a full CUDA graph needs one decode wrapper per captured batch size, each with
# FlashInfer's own 8 MiB int workspace on the device: vLLM's graph estimate holds both.
FLASHINFER_WORKSPACE_BYTES = 394 * MIB
FLASHINFER_DECODE_WRAPPER_BYTES = 8 * MIB
# Above this the OS, Docker and the page cache share too little of a unified-memory node.
HIGH_UTILIZATION = 0.9
# What the system-headroom remedy suggests instead.
SAFE_UTILIZATION = 0.85
# vLLM's CPU backend sizes each rank's KV cache from this variable (whole GiB), not from
# gpu_memory_utilization: platforms/cpu.py sets kv_cache_memory_bytes from it after the
# flags are read, so it wins over --kv-cache-memory-bytes too. The CUDA build ignores it.
CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
DROP_CACHES = "sudo sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'"
SEVERITIES = ("error", "warning", "info")
VERDICTS = ("fits", "fits_with_warnings", "does_not_fit", "unknown")
# The gpu-mem-util-gb mod's flag (not vLLM's own): the budget in GiB.
GIB_FLAG = "--gpu-memory-utilization-gb"


@dataclass
class Finding:
    """One result of the check: severity ("error", "warning", "info"), code, message, remedy."""

    severity: str
    code: str
    message: str
    remedy: str

    def to_dict(self) -> dict[str, str]:
        return {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "remedy": self.remedy,
        }


@dataclass
class NodeFit:
    """The memory table of one node's rank (bytes; None where a fact is missing)."""

    name: str
    rank: int
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    budget_bytes: int | None = None
    weights_bytes: int | None = None
    overhead_bytes: int | None = None
    overhead_parts: dict[str, int] = field(default_factory=dict)
    kv_budget_bytes: int | None = None
    kv_per_request_bytes: int | None = None
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    headroom_bytes: int | None = None
    available_headroom_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "budget_bytes": self.budget_bytes,
            "weights_bytes": self.weights_bytes,
            "kv_budget_bytes": self.kv_budget_bytes,
            "kv_per_request_bytes": self.kv_per_request_bytes,
            "max_concurrency": (
                None if self.max_concurrency is None else round(self.max_concurrency, 2)
            ),
            "rank": self.rank,
            "memory_total_bytes": self.memory_total_bytes,
            "memory_available_bytes": self.memory_available_bytes,
            "overhead_bytes": self.overhead_bytes,
            "overhead_parts": dict(self.overhead_parts),
            "kv_tokens": self.kv_tokens,
            "headroom_bytes": self.headroom_bytes,
            "available_headroom_bytes": self.available_headroom_bytes,
        }


@dataclass
class FitReport:
    """A verdict, the findings behind it, the per-node memory table (of the nodes used) and
    the parallel layout."""

    verdict: str
    findings: list[Finding] = field(default_factory=list)
    nodes: list[NodeFit] = field(default_factory=list)
    parallel: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    max_model_len: int | None = None
    # The nodes the ranks run on (the first world-size given) and the ones left out.
    nodes_used: list[str] = field(default_factory=list)
    nodes_left_out: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the verdict lets a launch go ahead (fits, with or without warnings)."""
        return self.verdict in ("fits", "fits_with_warnings")

    def to_dict(self) -> dict[str, Any]:
        """The `check --json` document."""
        return {
            "verdict": self.verdict,
            "findings": [f.to_dict() for f in self.findings],
            "nodes": [n.to_dict() for n in self.nodes],
            "parallel": dict(self.parallel),
            "missing": list(self.missing),
            "max_model_len": self.max_model_len,
            "nodes_used": list(self.nodes_used),
            "nodes_left_out": list(self.nodes_left_out),
        }


def gib(value: float) -> str:
    """Bytes as GiB with two decimals, as vLLM prints them."""
    return f"{value / GIB:.2f}"


@dataclass(frozen=True)
class RuntimeOverhead:
    """What one rank holds besides weights and KV cache, term by term (bytes)."""

    non_torch_bytes: int
    compile_bytes: int
    activation_bytes: int
    sampler_bytes: int
    cuda_graph_bytes: int

    @property
    def total_bytes(self) -> int:
        return (
            self.non_torch_bytes
            + self.compile_bytes
            + self.activation_bytes
            + self.sampler_bytes
            + self.cuda_graph_bytes
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "non_torch_bytes": self.non_torch_bytes,
            "compile_bytes": self.compile_bytes,
            "activation_bytes": self.activation_bytes,
            "sampler_bytes": self.sampler_bytes,
            "cuda_graph_bytes": self.cuda_graph_bytes,
        }


def num_speculative_tokens(args: ServeArgs) -> int:
    """Draft tokens per step of the recipe's speculative decoding (0 without it)."""
    spec = args.speculative_config or {}
    if not spec:
        return 0
    count = spec.get("num_speculative_tokens")
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return count
    if isinstance(count, str) and count.strip().isdigit():
        return int(count)
    return 1  # vLLM's MTP default when only the method is named


def _compilation_config(args: ServeArgs) -> dict[str, Any]:
    """`--compilation-config` as a mapping, in every spelling vLLM takes: `-O 0`, `-O0`,
    `-cc '{...}'`, `--compilation-config.mode 0`, `-cc.cudagraph_mode=none`; a bare
    number is the mode."""
    out: dict[str, Any] = {}
    for flag, raw in args.flags.items():
        name = flag.removeprefix("--")
        if name in ("compilation-config", "cc") and raw is not None:
            text = raw.strip()
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):
                out.update(parsed)
            elif isinstance(parsed, int) or text.isdigit():
                out["mode"] = int(text)
        elif name.startswith(("compilation-config.", "cc.")):
            out[name.split(".", 1)[1].replace("-", "_")] = raw
        elif len(name) > 1 and name[0] == "O" and name[1:].isdigit():
            out["mode"] = int(name[1:])  # `-O0`: the level written onto the flag
    return out


def _compiles(args: ServeArgs) -> bool:
    """Whether vLLM runs torch.compile (Inductor): not with --enforce-eager or mode 0."""
    if args.has("enforce-eager"):
        return False
    config = _compilation_config(args)
    mode = config.get("mode", config.get("level"))
    return mode is None or str(mode).strip().upper() not in ("0", "NONE")


def _captures_graphs(args: ServeArgs) -> bool:
    """Whether vLLM captures CUDA graphs: not with --enforce-eager or cudagraph_mode NONE."""
    if args.has("enforce-eager"):
        return False
    mode = _compilation_config(args).get("cudagraph_mode")
    return mode is None or str(mode).strip().upper() not in ("NONE", "0")


def capture_sizes(largest: int) -> list[int]:
    """vLLM's default CUDA graph batch sizes up to `largest`: 1, 2, 4, then steps of 8 to
    256 and of 16 beyond (51 sizes up to 512, as the GB10 logs list them)."""
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, MAX_CUDA_GRAPH_CAPTURE_SIZE + 1, 16)]
    return [n for n in sizes if n <= largest]


def _named_capture_sizes(args: ServeArgs) -> list[int] | None:
    """The CUDA graph batch sizes the compilation config names (`cudagraph_capture_sizes`),
    or None when vLLM picks its defaults."""
    raw = _compilation_config(args).get("cudagraph_capture_sizes")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)  # `-cc.cudagraph_capture_sizes=[1,2,4]`
        except json.JSONDecodeError:
            return None
    if not isinstance(raw, list) or not raw:
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in raw):
        return None
    return sorted(set(raw))


def _full_decode_graphs(args: ServeArgs) -> bool:
    """Whether vLLM captures full CUDA graphs of decode batches (its default mode,
    FULL_AND_PIECEWISE, does; PIECEWISE does not)."""
    mode = str(_compilation_config(args).get("cudagraph_mode") or "FULL_AND_PIECEWISE")
    return "FULL" in mode.strip().upper()


def _flashinfer_graph_bytes(
    args: ServeArgs, facts: ModelFacts | None, decode_tokens: int, sizes: list[int]
) -> int:
    """What FlashInfer adds to vLLM's CUDA graph estimate: per KV cache group with attention,
    its workspace and one decode wrapper per full decode graph (one group when the layout
    is not known)."""
    # The groups follow the layer counts alone: any element size will do to lay them out.
    shape = replace(facts, dtype=facts.dtype or "bfloat16") if facts is not None else None
    layout = layout_for(shape, args) if shape is not None else None
    groups = max(1, layout.attention_groups()) if layout is not None else 1
    decode_graphs = len([n for n in sizes if n <= decode_tokens])
    return groups * (FLASHINFER_WORKSPACE_BYTES + decode_graphs * FLASHINFER_DECODE_WRAPPER_BYTES)


def runtime_overhead(
    args: ServeArgs,
    facts: ModelFacts | None = None,
    *,
    unified: bool = True,
    env: Mapping[str, str] | None = None,
    measured_non_torch_bytes: int | None = None,
) -> RuntimeOverhead:
    """vLLM's non-KV, non-weight memory of one rank for these settings (see the constants).

    `unified` says the node shares one memory between CPU and GPU (GB10), where the
    compile workers' host memory counts against the GPU budget; `env` is the recipe's
    environment (VLLM_ATTENTION_BACKEND). `measured_non_torch_bytes` is the non-torch
    memory vLLM itself reported on the node (its memory profiling's DEBUG accounting),
    taken in place of the estimate when known.
    """
    tokens = args.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    seqs = min(args.max_num_seqs or DEFAULT_MAX_NUM_SEQS, tokens)
    draft = num_speculative_tokens(args)
    vocab = (facts.vocab_size if facts is not None else None) or DEFAULT_VOCAB_SIZE
    graphs = 0
    if _captures_graphs(args):
        named = _named_capture_sizes(args)
        if named is not None:
            # vLLM captures the sizes the recipe names (those within the batched tokens)
            # and no others: the largest decides the pool, not max_num_seqs.
            sizes = [n for n in named if n <= tokens]
        else:
            sizes = capture_sizes(min(MAX_CUDA_GRAPH_CAPTURE_SIZE, 2 * seqs * (1 + draft), tokens))
        captured = max(sizes, default=0)
        graphs = CUDA_GRAPH_BASE_BYTES + captured * CUDA_GRAPH_BYTES_PER_CAPTURED_TOKEN
        backend = attention_backend(args, facts, env or {}, unified=unified)
        if backend == FLASHINFER and _full_decode_graphs(args):
            graphs += _flashinfer_graph_bytes(args, facts, seqs * (1 + draft), sizes)
    non_torch = NON_TORCH_BYTES if measured_non_torch_bytes is None else measured_non_torch_bytes
    # vLLM's measured figure already holds the compile workers' host memory (it is taken
    # host-wide on unified memory), so it replaces both terms.
    compile_workers = COMPILE_WORKERS_BYTES if unified and _compiles(args) else 0
    return RuntimeOverhead(
        non_torch_bytes=non_torch,
        compile_bytes=compile_workers if measured_non_torch_bytes is None else 0,
        activation_bytes=tokens * ACTIVATION_BYTES_PER_TOKEN,
        sampler_bytes=seqs * (1 + draft) * vocab * LOGIT_BYTES,
        cuda_graph_bytes=graphs,
    )


def weights_per_rank_bytes(
    facts: ModelFacts, args: ServeArgs, env: Mapping[str, str]
) -> int | None:
    """Weight memory of one rank: weights / (TP x PP), as loaded, less a PLE table kept on
    disk and, with --language-model-only, less the multimodal encoders vLLM does not build;
    plus an audio tower vLLM builds from config.json that the checkpoint does not hold."""
    if facts.weight_bytes is None:
        return None
    weights = facts.weight_bytes
    if env.get("VLLM_PLE_TABLE_MEMORY", "").lower() == "disk" and facts.ple_table_bytes:
        weights -= facts.ple_table_bytes
    if args.has("language-model-only") and facts.encoder_bytes:
        weights -= min(facts.encoder_bytes, weights)
    shards = max(1, args.tensor_parallel_size) * max(1, args.pipeline_parallel_size)
    loaded = int(weights / shards * WEIGHT_LOAD_FACTOR)
    if facts.unbacked_encoder_bytes and builds_audio_tower(args):
        # Not sharded: transformers builds the tower whole on every rank.
        loaded += facts.unbacked_encoder_bytes
    return loaded


def builds_audio_tower(args: ServeArgs) -> bool:
    """Whether vLLM builds a model's audio tower: not with --language-model-only, nor with
    --limit-mm-per-prompt giving audio no item (vLLM then skips the tower)."""
    if args.has("language-model-only"):
        return False
    raw = args.flags.get("--limit-mm-per-prompt")
    try:
        limits = json.loads(raw) if raw else None
    except ValueError:
        return True
    audio = limits.get("audio") if isinstance(limits, Mapping) else None
    if isinstance(audio, Mapping):
        audio = audio.get("count")
    return audio != 0


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, limit + 1) if n % d == 0]


def used_nodes(args: ServeArgs, nodes: list[NodeFacts]) -> tuple[list[NodeFacts], list[NodeFacts]]:
    """(used, left out): a layout of fewer ranks than nodes runs on the first ones, as
    sparkrun does; the rest are named as left out."""
    world = max(1, args.world_size)
    return list(nodes[:world]), list(nodes[world:])


def _kv_heads_split(kv_heads: int, tp: int) -> bool:
    """Whether vLLM can split kv_heads over TP ranks: whole heads per rank, or whole ranks
    per head (replicas) when there are fewer heads than ranks."""
    return tp % kv_heads == 0 if tp >= kv_heads else kv_heads % tp == 0


def _kv_head_split_error(facts: ModelFacts, tp: int) -> tuple[int, str] | None:
    """(KV heads, the TP sizes that split them) for the first KV head count of the model
    (its layers', then its global layers') that TP does not split; None when all split."""
    if facts.attention == "mla":
        return None  # one latent per token, the same on every rank
    for kv_heads in (facts.num_key_value_heads, facts.num_global_key_value_heads):
        if kv_heads and not _kv_heads_split(kv_heads, tp):
            good = [n for n in range(1, max(8, tp) + 1) if _kv_heads_split(kv_heads, n)]
            return kv_heads, ", ".join(str(n) for n in good)
    return None


def _layout(tp: int, pp: int, dp: int) -> str:
    return f"TP {tp} x PP {pp} x DP {dp} = {plural(tp * pp * dp, 'rank')}"


def _parallel_findings(
    recipe: Recipe,
    args: ServeArgs,
    nodes: list[NodeFacts],
    facts: ModelFacts,
    unpicked: Sequence[str] | None = None,
) -> list[Finding]:
    out: list[Finding] = []
    tp, pp, dp = args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size
    world = tp * pp * dp
    n = len(nodes)
    heads = facts.num_attention_heads
    most = recipe.max_nodes
    source = "given" if unpicked is None else "picked"
    if world > n:
        fixes = []
        fit_tp = n // (pp * dp) if n % (pp * dp) == 0 else 0
        if (
            fit_tp >= 1
            and (most is None or n <= most)
            and n >= recipe.min_nodes
            and (heads is None or heads % fit_tp == 0)
        ):
            fixes.append(
                f"--set tensor_parallel={fit_tp} to run on the {plural(n, 'node')} {source}"
            )
        if unpicked:
            names = ",".join([nd.name for nd in nodes] + list(unpicked))
            fixes.append(f"pick {plural(world, 'node')} of {names} with {ON_FLAG} (head first)")
        else:
            fixes.append(f"give {plural(world, 'node')} (inventory, --hosts or facts file)")
        out.append(
            Finding(
                "error",
                "nodes_mismatch",
                f"{_layout(tp, pp, dp)} (one per Spark), but only {plural(n, 'node')} {source}",
                ", or ".join(fixes),
            )
        )
    elif world < n or unpicked:
        used, left = used_nodes(args, nodes)
        left_out = [nd.name for nd in left] + list(unpicked or ())
        if world == n:
            why = "the layout takes every node picked"
        elif most is not None and most < n:
            why = f"the recipe runs on at most {plural(most, 'node')}"
        else:
            why = f"to use all {n}, change the layout (--set tensor_parallel=N)"
        what, change = choice_text(
            [nd.name for nd in used], left_out, picked=unpicked is not None, candidates=n
        )
        out.append(
            Finding(
                "info",
                "nodes_left_out",
                f"{_layout(tp, pp, dp)}: {what}",
                f"nothing to do ({why}); {change}",
            )
        )
    if n < recipe.min_nodes:
        out.append(
            Finding(
                "error",
                "too_few_nodes",
                f"recipe {recipe.name} needs at least {plural(recipe.min_nodes, 'node')}, "
                f"{n} {source}",
                f"pick {plural(recipe.min_nodes, 'node')} with {ON_FLAG} (head first)"
                if unpicked
                else f"give {plural(recipe.min_nodes, 'node')} (inventory, --hosts or facts file)",
            )
        )
    elif world < recipe.min_nodes:
        out.append(
            Finding(
                "error",
                "too_few_ranks",
                f"recipe {recipe.name} runs on at least {plural(recipe.min_nodes, 'node')}, but "
                f"{_layout(tp, pp, dp)}",
                f"--set tensor_parallel={recipe.min_nodes // (pp * dp) or 1} "
                f"(the recipe's layout is for {plural(recipe.min_nodes, 'node')} or more)",
            )
        )
    if most is not None and world > most:
        out.append(
            Finding(
                "error",
                "too_many_nodes",
                f"recipe {recipe.name} runs on at most {plural(most, 'node')}, but "
                f"{_layout(tp, pp, dp)}",
                f"--set tensor_parallel={max(1, most // (pp * dp))} (or a recipe made for "
                f"{plural(world, 'node')})",
            )
        )
    if heads is not None and heads % tp != 0:
        good = ", ".join(str(d) for d in _divisors(heads, max(8, n, tp)))
        out.append(
            Finding(
                "error",
                "tp_heads",
                f"Total number of attention heads ({heads}) must be divisible by "
                f"tensor parallel size ({tp}).",
                f"use a tensor parallel size that divides {heads}: {good} "
                f"(--set tensor_parallel=N, with N x PP x DP nodes)",
            )
        )
    kv_split = _kv_head_split_error(facts, tp)
    if kv_split is not None and (heads is None or heads % tp == 0):
        kv_heads, good = kv_split
        # vLLM's QKVParallelLinear splits the KV heads with divide(): its assertion is all
        # the failure says.
        larger, smaller = max(tp, kv_heads), min(tp, kv_heads)
        out.append(
            Finding(
                "error",
                "tp_kv_heads",
                f"vLLM will stop at load with AssertionError: {larger} is not divisible by "
                f"{smaller} (the model's {kv_heads} KV heads over TP {tp}: each rank takes a "
                "whole number of heads, or a whole number of ranks share one)",
                f"use a tensor parallel size that fits {kv_heads} KV heads: {good} "
                f"(--set tensor_parallel=N, with N x PP x DP nodes)",
            )
        )
    layers = facts.num_hidden_layers
    if layers is not None and pp > layers:
        out.append(
            Finding(
                "error",
                "pp_layers",
                f"pipeline parallel size {pp} is larger than the model's {layers} layers",
                f"--set pipeline_parallel=N with N <= {layers}",
            )
        )
    ray = recipe.runtime == "vllm-ray" or (args.distributed_executor_backend or "") == "ray"
    if ray and dp > 1:
        out.append(
            Finding(
                "error",
                "ray_data_parallel",
                f"the vllm-ray runtime does not support data_parallel > 1 (DP {dp})",
                "use vllm-distributed for data parallelism (drop distributed_executor_backend: "
                "ray), or --set data_parallel=1",
            )
        )
    nodes = used_nodes(args, nodes)[0]
    totals = [nd.memory_total_bytes for nd in nodes if nd.memory_total_bytes]
    if len(totals) > 1 and min(totals) > 0:
        spread = max(totals) / min(totals) - 1
        if spread >= 0.03:
            sizes = ", ".join(
                f"{nd.name} {gib(nd.memory_total_bytes)} GiB"
                for nd in nodes
                if nd.memory_total_bytes
            )
            severity = "error" if spread >= 0.10 else "warning"
            out.append(
                Finding(
                    severity,
                    "memory_size_mismatch",
                    f"nodes differ in memory size ({sizes}); every rank gets the same share "
                    "of the model, so the smallest node bounds the cluster",
                    "use Sparks of the same memory size (NVIDIA's playbook: \"Use two Sparks "
                    'of the same memory size"), or the recipe made for the smaller size',
                )
            )
    return out


def _free_memory_message(free: int, total: int, util: float, budget: int) -> str:
    # vLLM's own words (vllm/v1/worker/utils.py request_memory), with this node's numbers.
    return (
        f"Free memory on device cuda:0 ({gib(free)}/{gib(total)} GiB) on startup is less than "
        f"desired GPU memory utilization ({util}, {gib(budget)} GiB). Decrease GPU memory "
        "utilization or reduce GPU memory used by other processes."
    )


def _max_seq_len_message(max_len: int, needed: int, available: int, estimate: int) -> str:
    # vLLM's own words (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory).
    return (
        f"To serve at least one request with the models's max seq len ({max_len}), "
        f"({gib(needed)} GiB KV cache is needed, which is larger than the available KV cache "
        f"memory ({gib(available)} GiB). Based on the available memory, the estimated maximum "
        f"model length is {estimate}. Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine."
    )


NO_CACHE_BLOCKS = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
    "when initializing the engine."
)


@dataclass(frozen=True)
class Budget:
    """How the command sets a rank's memory budget: a fraction of the node's memory
    (`--gpu-memory-utilization`), or GiB (`--gpu-memory-utilization-gb`, from the
    gpu-mem-util-gb mod, which wins over the fraction). `key` is what `--set` changes."""

    fraction: float = 0.92
    gib: float | None = None
    key: str = "gpu_memory_utilization"

    def bytes_of(self, total: int) -> int:
        """The budget on a node of `total` bytes (the mod rounds GiB up to a byte)."""
        if self.gib is not None:
            return math.ceil(self.gib * GIB)
        return int(self.fraction * total)

    def share(self, total: int) -> float:
        """The budget as a share of the node's memory."""
        return self.bytes_of(total) / total if total else self.fraction

    def said(self, total: int | None) -> str:
        """The budget as the command gives it (`0.9 x 121.69 GiB`, `108 GiB`)."""
        if self.gib is not None:
            return f"--gpu-memory-utilization-gb {self.gib:g}"
        return f"{self.fraction} x {gib(total or 0)} GiB"

    def set_to_share(self, share: float, total: int) -> str:
        """The `--set` that budgets `share` of a node of `total` bytes."""
        if self.gib is not None:
            return f"--set {self.key}={math.floor(share * total / GIB)}"
        return f"--set {self.key}={share:.2f}"

    def set_to(self, budget_bytes: int, total: int | None) -> str:
        """The `--set` that gives a budget of `budget_bytes` (rounded the safe way)."""
        if self.gib is not None:
            return f"--set {self.key}={math.floor(budget_bytes / GIB)}"
        share = budget_bytes / total if total else self.fraction
        return f"--set {self.key}={max(math.floor(share * 100) / 100, 0.05):.2f}"


def _raise_util(needed: int, total: int | None, budget: Budget | None = None) -> str:
    """A remedy fragment: the budget setting that would hold `needed` bytes."""
    budget = budget or Budget()
    if not total:
        return f"raise {budget.key}, "
    util = math.ceil(needed / total * 100) / 100
    if util > 0.95:
        return ""  # no sensible utilization holds it: more nodes or a smaller model
    if budget.gib is not None:
        return f"--set {budget.key}={math.ceil(needed / GIB)}, "
    return f"--set {budget.key}={util:.2f}, "


def budget_of(recipe: Recipe, args: ServeArgs) -> Budget:
    """The command's budget, and the recipe key `--set` changes it with."""
    if args.gpu_memory_utilization_gb is None:
        return Budget(args.gpu_memory_utilization)
    escapes = uses_escapes(recipe.command, recipe.recipe_version)
    fed = placeholder_flags(recipe.command, escapes)
    key = next(
        (k for k, flag in fed.items() if flag.replace("_", "-") == GIB_FLAG),
        "gpu_memory_utilization_gb",
    )
    return Budget(args.gpu_memory_utilization, args.gpu_memory_utilization_gb, key)


def _gib_budget_message(budget: int, total: int, free: int) -> str:
    # The gpu-mem-util-gb mod's own words (its request_memory), with this node's numbers.
    if budget > total:
        return (
            f"Requested memory ({gib(budget)} GiB) exceeds total GPU memory ({gib(total)} GiB). "
            "Reduce gpu_memory_utilization_gb or use a smaller value."
        )
    return (
        f"Requested memory ({gib(budget)} GiB) exceeds available memory ({gib(free)} GiB). "
        "Reduce gpu_memory_utilization_gb or free up GPU memory."
    )


def _unified_memory(node: NodeFacts) -> bool:
    # GB10 shares one memory between CPU and GPU; an unknown GPU is taken to be a Spark.
    return node.gpu_name is None or "GB10" in node.gpu_name.upper()


def _node_findings(
    node: NodeFacts,
    fit: NodeFit,
    args: ServeArgs,
    layout: KVLayout | None,
    max_len: int | None,
    positions: int | None = None,
    kv_source: str = "--kv-cache-memory-bytes",
    plan: Budget | None = None,
    fp8_fits: bool = True,
) -> list[Finding]:
    """What the node's fit says. `fp8_fits`: an fp8 KV cache would hold one full-length
    request with the spread free (else no remedy names it)."""
    out: list[Finding] = []
    from_env = kv_source == CPU_KV_ENV
    plan = plan or Budget(args.gpu_memory_utilization)
    util = args.gpu_memory_utilization
    # How much smaller this node's KV cache may come out at a start than predicted: every
    # budget and length a remedy names leaves it free, so following one never lands in it.
    spread = (
        NON_TORCH_SPREAD_BYTES
        if _unified_memory(node) and args.kv_cache_memory_bytes is None
        else 0
    )
    total, avail, budget = fit.memory_total_bytes, fit.memory_available_bytes, fit.budget_bytes
    # The CPU backend never holds the utilization against free memory when the variable sizes
    # its KV cache (it checks that KV cache against what is free, below).
    if total is not None and avail is not None and budget is not None and not from_env:
        cache = node.page_cache_bytes or 0
        free = avail - cache if _unified_memory(node) else avail
        if avail < budget:
            # What CUDA will see free once the page cache is dropped, less a margin.
            target = avail - total // 100
            said = (
                _gib_budget_message(budget, total, avail)
                if plan.gib is not None
                else _free_memory_message(avail, total, util, budget)
            )
            out.append(
                Finding(
                    "error",
                    "free_memory",
                    "vLLM will stop at startup: " + said,
                    "stop what holds memory on the node (other containers, desktop apps), "
                    f"or lower the budget: {plan.set_to(target, total)}",
                )
            )
        elif cache and free < budget:
            said = (
                _gib_budget_message(budget, total, free)
                if plan.gib is not None
                else _free_memory_message(free, total, util, budget)
            )
            out.append(
                Finding(
                    "error",
                    "page_cache",
                    "vLLM will stop at startup: "
                    + said
                    + f" On GB10 the page cache counts as used GPU memory: MemAvailable is "
                    f"{gib(avail)} GiB but {gib(cache)} GiB of it is page cache, which covers "
                    f"the {gib(budget - free)} GiB gap",
                    f"drop the page cache on the named node(s) before launch: {DROP_CACHES}",
                )
            )
        if plan.share(total) > HIGH_UTILIZATION and _unified_memory(node):
            named = f"{plan.key} {plan.gib:g} GiB" if plan.gib is not None else f"{plan.key} {util}"
            out.append(
                Finding(
                    "warning",
                    "system_headroom",
                    f"{named} leaves {gib(total - budget)} GiB of the "
                    "unified memory for the OS, Docker and the page cache; GB10 nodes have "
                    "failed at startup with NVRM out-of-memory errors at such settings",
                    f"{plan.set_to_share(SAFE_UTILIZATION, total)} (or lower)",
                )
            )
    weights, kv_budget = fit.weights_bytes, fit.kv_budget_bytes
    if weights is not None and budget is not None and args.kv_cache_memory_bytes is None:
        if weights >= budget:
            out.append(
                Finding(
                    "error",
                    "weights_exceed_budget",
                    f"weights need {gib(weights)} GiB per rank, more than the budget of "
                    f"{gib(budget)} GiB ({plan.said(total)}); vLLM will stop "
                    f"with: {NO_CACHE_BLOCKS}",
                    "spread the model over more nodes (--set tensor_parallel=N with N nodes), "
                    + _raise_util(
                        weights
                        + (fit.overhead_bytes or 0)
                        + (fit.kv_per_request_bytes or 0)
                        + spread,
                        total,
                        plan,
                    )
                    + "or use a smaller (more quantized) checkpoint",
                )
            )
            return out
    if weights is not None and args.kv_cache_memory_bytes is not None and avail is not None:
        cache = node.page_cache_bytes or 0
        free = avail - cache if _unified_memory(node) else avail
        need = weights + (fit.overhead_bytes or 0) + args.kv_cache_memory_bytes
        if need > free:
            out.append(
                Finding(
                    "error",
                    "kv_cache_memory_exceeds_free",
                    f"weights {gib(weights)} GiB + runtime {gib(fit.overhead_bytes or 0)} GiB + "
                    f"{kv_source} {gib(args.kv_cache_memory_bytes)} GiB = "
                    f"{gib(need)} GiB per rank, more than the {gib(free)} GiB free",
                    (
                        f"lower {CPU_KV_ENV} in the recipe's env"
                        if from_env
                        else "lower kv_cache_memory_bytes (--set kv_cache_memory_bytes=2G)"
                    )
                    + f", free memory on the node ({DROP_CACHES} drops the page cache), "
                    "or add nodes",
                )
            )
            return out
    if kv_budget is not None and kv_budget <= 0:
        out.append(
            Finding(
                "error",
                "no_kv_memory",
                f"no memory is left for the KV cache: budget {gib(budget or 0)} GiB - weights "
                f"{gib(weights or 0)} GiB - runtime {gib(fit.overhead_bytes or 0)} GiB = "
                f"{gib(kv_budget)} GiB; vLLM will stop with: {NO_CACHE_BLOCKS}",
                _raise_util(
                    (weights or 0)
                    + (fit.overhead_bytes or 0)
                    + (fit.kv_per_request_bytes or 0)
                    + spread,
                    total,
                    plan,
                )
                + "or spread the model over more nodes",
            )
        )
        return out
    needed = fit.kv_per_request_bytes
    if layout is not None and kv_budget is not None and needed is not None and max_len:
        # A fixed KV cache (--kv-cache-memory-bytes) does not move with non-torch memory
        # (spread 0), and vLLM fits an `auto` length itself (see auto's note).
        if spread and not args.max_model_len_auto and needed <= kv_budget < needed + spread:
            out.append(_margin_finding(fit, args, layout, max_len, positions, plan, fp8_fits))
        if needed > kv_budget:
            estimate = layout.max_len_for(kv_budget, max_len)
            clear = layout.max_len_for(kv_budget - spread, max_len)
            # Never suggest a length past the model's own positions.
            longest = min(estimate, positions) if positions else estimate
            suggested = min(clear, longest) if clear >= 1 else longest
            options = [f"--set max_model_len={suggested}"]
            if suggested < longest:
                options[0] += (
                    f" (vLLM's estimate less the {gib(spread)} GiB its non-torch memory "
                    "varies by on GB10)"
                )
            if from_env:
                options.append(f"set {CPU_KV_ENV}={math.ceil(needed / GIB)} in the recipe's env")
            elif args.kv_cache_memory_bytes is not None:
                options.append(f"--set kv_cache_memory_bytes={math.ceil(needed / GIB)}G")
            else:
                more = _raise_util(
                    (weights or 0) + (fit.overhead_bytes or 0) + needed + spread, total, plan
                )
                if more.strip(", "):
                    options.append(more.strip(", "))
            if fp8_fits and not args.kv_cache_dtype.startswith("fp8"):
                options.append("--set kv_cache_dtype=fp8")
            out.append(
                Finding(
                    "error",
                    "kv_max_seq_len",
                    "vLLM will stop at startup: "
                    + _max_seq_len_message(max_len, needed, kv_budget, estimate),
                    _alternatives(options),
                )
            )
        elif (
            fit.max_concurrency is not None
            and args.max_num_seqs is not None
            and fit.max_concurrency < args.max_num_seqs
        ):
            out.append(
                Finding(
                    "info",
                    "concurrency_at_full_length",
                    f"{fit.max_concurrency:.2f} requests of the full {max_len} tokens fit in the "
                    f"KV cache at once; max_num_seqs={args.max_num_seqs} are served together when "
                    "requests are shorter (normal for long-context recipes)",
                    "nothing to do; to hold more full-length requests lower max_model_len"
                    + ("" if args.kv_cache_dtype.startswith("fp8") else " or use fp8 KV"),
                )
            )
    return out


def _margin_finding(
    fit: NodeFit,
    args: ServeArgs,
    layout: KVLayout,
    max_len: int,
    positions: int | None,
    plan: Budget,
    fp8_fits: bool = True,
) -> Finding:
    """The warning for a KV budget that holds one full-length request by less than vLLM's
    non-torch measurement varies on GB10, with what leaves that much free."""
    kv_budget, needed = fit.kv_budget_bytes or 0, fit.kv_per_request_bytes or 0
    spare = kv_budget - needed
    options = []
    shorter = layout.max_len_for(kv_budget - NON_TORCH_SPREAD_BYTES, max_len)
    shorter = min(shorter, positions) if positions else shorter
    if shorter >= 1:
        options.append(f"--set max_model_len={shorter}")
    more = _raise_util(
        (fit.weights_bytes or 0) + (fit.overhead_bytes or 0) + needed + NON_TORCH_SPREAD_BYTES,
        fit.memory_total_bytes,
        plan,
    ).strip(", ")
    if more:
        options.append(more)
    if fp8_fits and not args.kv_cache_dtype.startswith("fp8"):
        options.append("--set kv_cache_dtype=fp8")
    return Finding(
        "warning",
        "kv_margin_tight",
        f"one request of the full {max_len} tokens needs {gib(needed)} GiB of KV cache and the "
        f"predicted {gib(kv_budget)} GiB holds it with {gib(spare)} GiB to spare, less than the "
        f"{gib(NON_TORCH_SPREAD_BYTES)} GiB by which vLLM's non-torch memory varies between "
        "starts of one setting on GB10 (it measures it host-wide): a start may stop with "
        f'"max seq len ({max_len}) ... larger than the available KV cache memory"',
        "leave the spread free: "
        + (_alternatives(options) if options else "spread the model over more nodes"),
    )


def _fp8_kv_fits(
    args: ServeArgs,
    facts: ModelFacts,
    env: Mapping[str, str],
    node: NodeFacts,
    fit: NodeFit,
    max_len: int | None,
) -> bool:
    """Whether `--set kv_cache_dtype=fp8` would hold one request of `max_len` on this node
    with the spread free. fp8 halves the request's KV, but on GB10 it also moves attention
    to FlashInfer, whose CUDA graphs can take more than it saves on a small budget; True
    when that cannot be told (as before: the remedy is offered)."""
    fp8 = replace(args, kv_cache_dtype="fp8")
    layout = layout_for(facts, fp8)
    unified = _unified_memory(node)
    if layout is None or not max_len:
        return True
    if args.kv_cache_memory_bytes is not None:
        kv_budget = args.kv_cache_memory_bytes
    elif fit.budget_bytes is None or fit.weights_bytes is None:
        return True
    else:
        overhead = runtime_overhead(fp8, facts, unified=unified, env=env).total_bytes
        kv_budget = fit.budget_bytes - fit.weights_bytes - overhead
    spread = NON_TORCH_SPREAD_BYTES if unified and args.kv_cache_memory_bytes is None else 0
    return layout.request_bytes(max_len) + spread <= kv_budget


def _alternatives(options: list[str]) -> str:
    """`a; or b, or c`: the first remedy, then the others."""
    return options[0] + ("; or " + ", or ".join(options[1:]) if options[1:] else "")


def _auto_max_model_len(
    fits: list[NodeFit], layout: KVLayout, positions: int, spread: Mapping[str, int]
) -> tuple[int, Finding | None]:
    """The length `--max-model-len auto` gives, as vLLM fits it: the model's maximum when one
    request of it fits every rank's KV cache, else the longest that fits the smallest.
    `spread`: by how much each node's KV cache may come out smaller at a start (by name)."""
    budgets = [(f.kv_budget_bytes, f.name) for f in fits]
    if not budgets or any(b is None or b <= 0 for b, _ in budgets):
        return positions, None  # unknown or no KV memory: the other findings say so
    smallest, name = min((b, n) for b, n in budgets if b is not None)
    fitted = layout.max_len_for(smallest, positions)
    # The shortest it may come out at a start where vLLM's non-torch figure is high.
    least = min(
        layout.max_len_for(b - spread.get(n, 0), positions) for b, n in budgets if b is not None
    )
    varies, remedy = "", "nothing to do"
    if spread and 1 <= least < min(fitted, positions):
        varies = (
            f"; on GB10 vLLM's non-torch memory varies by {gib(max(spread.values()))} GiB "
            f"between starts, so a start may come out at {least} to {min(fitted, positions)} "
            "tokens"
        )
        remedy = (
            f"nothing to do; for one length at every start --set max_model_len={least}, "
            "for longer ones free memory for the KV cache"
        )
    if fitted >= positions:
        return positions, Finding(
            "info",
            "max_model_len_auto",
            f"max_model_len auto: the model's maximum of {positions} tokens fits, so vLLM uses "
            f"it{varies}",
            remedy,
        )
    if fitted < 1:
        return positions, None  # not even one token: kv_max_seq_len says what vLLM says
    return fitted, Finding(
        "info",
        "max_model_len_auto",
        f"max_model_len auto: the model's maximum of {positions} tokens does not fit the "
        f"{gib(smallest)} GiB KV cache of {name}, so vLLM reduces it to {fitted} tokens{varies}",
        remedy
        if varies
        else "nothing to do; for longer requests free memory for the KV cache "
        "(or --set max_model_len=N to fix the length)",
    )


def _group_findings(per_node: list[tuple[str, Finding]], n_nodes: int) -> list[Finding]:
    """One finding per distinct problem, naming the nodes it applies to."""
    grouped: dict[tuple[str, str, str, str], list[str]] = {}
    for name, f in per_node:
        grouped.setdefault((f.severity, f.code, f.message, f.remedy), []).append(name)
    out: list[Finding] = []
    for (severity, code, message, remedy), names in grouped.items():
        where = "all nodes" if len(names) == n_nodes and n_nodes > 1 else ", ".join(names)
        out.append(Finding(severity, code, f"{where}: {message}", remedy))
    return out


def _missing_finding(facts: ModelFacts, missing: list[str]) -> Finding:
    model_keys = [m for m in missing if ":" not in m]
    node_keys = [m for m in missing if ":" in m]
    parts = []
    remedies = []
    if model_keys:
        parts.append(f"model facts of {facts.model_id}: {', '.join(model_keys)}")
        remedies.append(
            f"add {', '.join(model_keys)} to the recipe's metadata, or give a node of the facts "
            f"file a `models` entry for {facts.model_id} with `config` (its config.json) and "
            "`weight_bytes` (`spark-tui probe --json` fills them from the node's Hugging Face "
            "cache)"
        )
    if node_keys:
        parts.append(f"node facts: {', '.join(node_keys)}")
        remedies.append("probe the nodes again (`spark-tui probe --json`) or fill these in")
    return Finding(
        "warning",
        "facts_missing",
        "cannot tell whether it fits; missing " + "; ".join(parts),
        "; ".join(remedies),
    )


def verdict_of(findings: list[Finding], missing: list[str]) -> str:
    """The verdict the findings and missing facts give (errors block)."""
    return _verdict(findings, missing)


def _verdict(findings: list[Finding], missing: list[str]) -> str:
    if any(f.severity == "error" for f in findings):
        return "does_not_fit"
    if missing:
        return "unknown"
    if any(f.severity == "warning" for f in findings):
        return "fits_with_warnings"
    return "fits"


def cpu_kv_cache(env: Mapping[str, str]) -> tuple[int | None, Finding | None]:
    """The KV cache bytes per rank the recipe's VLLM_CPU_KVCACHE_SPACE gives vLLM's CPU
    backend (None when it is not set), and the finding that says so (or that vLLM would
    refuse the value: it reads it with int())."""
    raw = env.get(CPU_KV_ENV)
    if raw is None or str(raw).strip() == "":
        return None, None
    text = str(raw).strip()
    try:
        space = int(text)
    except ValueError:
        return None, Finding(
            "error",
            "cpu_kv_cache_space",
            f"{CPU_KV_ENV}={text} is not a whole number of GiB: vLLM's CPU backend stops at "
            f"startup with ValueError: invalid literal for int() with base 10: '{text}'",
            f"set {CPU_KV_ENV} in the recipe's env to a whole number of GiB (e.g. 1)",
        )
    return space * GIB, Finding(
        "info",
        "kv_cache_from_env",
        f"the KV cache is {space} GiB per rank, from {CPU_KV_ENV}={text} in the recipe's env "
        "(vLLM's CPU backend sizes it from this, not from gpu_memory_utilization or "
        "--kv-cache-memory-bytes)",
        f"change {CPU_KV_ENV} in the recipe's env to size it",
    )


def check_fit(
    recipe: Recipe,
    argv: list[str],
    env: Mapping[str, str],
    nodes: list[NodeFacts],
    facts: ModelFacts,
    *,
    hf_token_set: bool | None = None,
    unpicked: Sequence[str] | None = None,
) -> FitReport:
    """Check a rendered serve command against the nodes (rank order) and the model facts.

    `hf_token_set` says whether HF_TOKEN will reach the containers (None: not known, as
    in an offline check); a gated model without it fails vLLM's download with a 401.
    `unpicked`: the user picked `nodes` (see core.selection) and left these out; None:
    `nodes` are every node given.
    """
    args = parse_serve_args(argv)
    check_fact_ranges(facts, f"model facts of {facts.model_id}", FactsError)
    findings = _parallel_findings(recipe, args, nodes, facts, unpicked)
    cpu_kv, cpu_kv_finding = cpu_kv_cache(env)
    if cpu_kv_finding is not None:
        findings.append(cpu_kv_finding)
    if cpu_kv is not None:
        args = replace(args, kv_cache_memory_bytes=cpu_kv)
    # A mod nobody found blocks: the serve command would start without what it needs.
    findings += [Finding("error", *f) for f in prelaunch.findings(recipe)]
    findings += [Finding("error", r.code, r.message, r.remedy) for r in refusals(args)]
    findings += [
        Finding(
            "error" if facts.num_experts is not None else "warning", r.code, r.message, r.remedy
        )
        for r in data_parallel_refusals(args, facts.num_experts, cpu=cpu_kv is not None)
    ]
    for token in undeclared_references(argv, env):
        err = undeclared_reference_error(token, recipe.name)
        findings.append(Finding("error", "undeclared_variable", err.message, err.remedy))
    given = nodes
    nodes, left_out = used_nodes(args, nodes)
    offline = str(env.get("HF_HUB_OFFLINE", "")).lower() in ("1", "true", "yes")
    if recipe.metadata.get("gated") and hf_token_set is False and not offline:
        findings.append(
            Finding(
                "warning",
                "gated_model",
                f"{recipe.model} is a gated model and HF_TOKEN is not set: vLLM's download "
                'will fail with 401 "Cannot access gated repo"',
                "accept the licence on huggingface.co, then `export HF_TOKEN=...` before the "
                "launch (it is passed to the containers by reference, never printed)",
            )
        )
    ignored = ignored_metadata(recipe.metadata)
    if ignored:
        findings.append(
            Finding(
                "info",
                "metadata_ignored",
                "recipe metadata the fit check does not read: "
                + "; ".join(f"{key} ({why})" for key, why in ignored.items()),
                "nothing to do: the check takes these from the command and the model's facts",
            )
        )
    missing = missing_for_fit(facts, args)
    for node in nodes:
        for key in ("memory_total_bytes", "memory_available_bytes"):
            if getattr(node, key) is None:
                missing.append(f"{node.name}:{key}")
    max_len = args.max_model_len or facts.max_position_embeddings
    limit = facts.max_position_embeddings
    if args.max_model_len and limit and args.max_model_len > limit:
        allowed = env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "") in ("1", "true", "True")
        findings.append(
            Finding(
                "warning" if allowed else "error",
                "max_model_len_exceeds_model",
                # vLLM's own words (config/model.py), so the check reads like the failure.
                f"User-specified max_model_len ({args.max_model_len}) is greater than the "
                f"derived max_model_len (max_position_embeddings={limit} in model's "
                "config.json)",
                f"--set max_model_len={limit}"
                + ("" if allowed else " (or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 knowingly)"),
            )
        )
    layout = layout_for(facts, args)
    weights = weights_per_rank_bytes(facts, args, env)
    plan = budget_of(recipe, args)
    per_node: list[tuple[str, Finding]] = []
    fits: list[NodeFit] = []
    for rank, node in enumerate(nodes):
        parts = runtime_overhead(args, facts, unified=_unified_memory(node), env=env)
        overhead = parts.total_bytes
        fit = NodeFit(
            name=node.name,
            rank=rank,
            memory_total_bytes=node.memory_total_bytes,
            memory_available_bytes=node.memory_available_bytes,
            weights_bytes=weights,
            overhead_bytes=overhead,
            overhead_parts=parts.to_dict(),
        )
        if node.memory_total_bytes is not None:
            fit.budget_bytes = plan.bytes_of(node.memory_total_bytes)
            fit.headroom_bytes = node.memory_total_bytes - fit.budget_bytes
            if node.memory_available_bytes is not None:
                fit.available_headroom_bytes = node.memory_available_bytes - fit.budget_bytes
        if args.kv_cache_memory_bytes is not None:
            fit.kv_budget_bytes = args.kv_cache_memory_bytes  # wins over the utilization
        elif fit.budget_bytes is not None and weights is not None:
            fit.kv_budget_bytes = fit.budget_bytes - weights - overhead
        fits.append(fit)
    if args.max_model_len_auto and layout is not None and max_len:
        spread = {
            node.name: NON_TORCH_SPREAD_BYTES
            for node in nodes
            if _unified_memory(node) and args.kv_cache_memory_bytes is None
        }
        max_len, auto_finding = _auto_max_model_len(fits, layout, max_len, spread)
        if auto_finding is not None:
            findings.append(auto_finding)
    for fit, node in zip(fits, nodes, strict=True):
        if layout is not None and max_len:
            fit.kv_per_request_bytes = layout.request_bytes(max_len)
            if fit.kv_budget_bytes is not None and fit.kv_budget_bytes > 0:
                fit.kv_tokens = layout.reported_tokens(fit.kv_budget_bytes, max_len)
                fit.max_concurrency = layout.max_concurrency(fit.kv_budget_bytes, max_len)
        kv_source = CPU_KV_ENV if cpu_kv is not None else "--kv-cache-memory-bytes"
        fp8 = _fp8_kv_fits(args, facts, env, node, fit, max_len)
        for f in _node_findings(node, fit, args, layout, max_len, limit, kv_source, plan, fp8):
            per_node.append((node.name, f))
    findings += _group_findings(per_node, len(nodes))
    if missing:
        findings.append(_missing_finding(facts, missing))
    return FitReport(
        verdict=_verdict(findings, missing),
        findings=findings,
        nodes=fits,
        parallel={
            "tensor_parallel": args.tensor_parallel_size,
            "pipeline_parallel": args.pipeline_parallel_size,
            "data_parallel": args.data_parallel_size,
            "world_size": args.world_size,
            "nodes": len(nodes),
            "nodes_given": len(given),
        },
        nodes_used=[nd.name for nd in nodes],
        nodes_left_out=[nd.name for nd in left_out] + list(unpicked or ()),
        missing=missing,
        max_model_len=max_len,
    )

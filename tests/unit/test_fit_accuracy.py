"""Accuracy of the fit predictions against real vLLM logs (copies in tests/fixtures/).

Two sets of GB10 logs. WEIGHT_LOGS are the ones the fit constants were read from (the
weight load factor, non-torch, compile workers, activation per token, CUDA graph terms).
HELD_OUT logs were collected afterwards from other runs (other models, KV dtypes, vLLM
versions and settings) and no constant was read from them: each is held to the budgets
(weights within 3 %, available KV within 5 %, KV tokens within 2 %) where it gives the inputs.
A log whose miss lies in an input no flag decides but the log prints (vLLM's own non-torch
figure, measured host-wide on GB10) is held given that input, and says so.

Weight memory: predicted from each log's own "Checkpoint size" (or model_facts.tsv) and
its TP x PP, against its "Model loading took X GiB". KV cache: tokens and concurrency from
the model's config and the log's "Available KV cache memory", against "GPU KV cache size"
and "Maximum concurrency"; and the KV one request needs, against vLLM's startup check.
Run with `-s` (or `python benchmarks/fit_accuracy.py`) to see the figures.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from spark_tui.core.facts import GIB, ModelFacts
from spark_tui.core.fit import (
    COMPILE_WORKERS_BYTES,
    NON_TORCH_SPREAD_BYTES,
    Budget,
    RuntimeOverhead,
    runtime_overhead,
    weights_per_rank_bytes,
)
from spark_tui.core.kv_cache import layout_for
from spark_tui.core.model_facts import HubFacts, facts_from_hf_config, facts_from_hub
from spark_tui.core.serve_args import ServeArgs, parse_serve_args

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# Logs whose weight memory is predicted from their own "Checkpoint size" lines.
WEIGHT_LOGS = {
    "gemma-4-12B-it (GB10)": "vllm_startup_gb10_gemma4_12b.log",
    "gemma-4-26B-A4B-it (GB10)": "vllm_startup_gb10_gemma4_26b_single_node.log",
    "gemma-4-31B-it (GB10)": "vllm_startup_gb10_gemma4_31b_fp8kv_cold.log",
    "Qwen3.6-35B + DFlash (GB10)": "vllm_startup_gb10_qwen36_dflash_specdec.log",
    "Qwen3.8-Flash-Next TP2 rank 0 (GB10)": "vllm_multinode_tp2_head_rank0.log",
    "Qwen3.8-Flash-Next TP2 rank 1 (GB10)": "vllm_multinode_tp2_worker_rank1_headless.log",
    "gemma-4-E4B-it (sm120)": "vllm_fail_no_available_memory_cache_blocks.log",
}
HEAD_LOG = "vllm_multinode_tp2_head_rank0.log"  # the worker's TP comes from the head's args


@dataclass(frozen=True)
class HeldOut:
    """A held-out GB10 log, the config its model facts come from, and what it is held to."""

    fixture: str
    config: str | None = None  # a config.json fixture: KV tokens are compared when given
    no_tokens: str = "no config of the model at hand"  # why KV tokens are not compared
    # Budgets the model is known to miss on this log, with why (pytest xfail, strict).
    misses: tuple[tuple[str, str], ...] = ()
    # Budgets held given an input the run's settings do not determine and the log prints
    # (vLLM's own non-torch figure): the figure is held to its budget with that input, and
    # without it only reported, with what is missing.
    needs: tuple[tuple[str, str], ...] = ()
    # The checkpoint's tensor name prefixes (which encoders it holds), where known.
    modules: tuple[str, ...] | None = None
    compare_tokens: bool = True  # False: no_tokens says why KV tokens are not compared


# The module prefixes of the NVFP4 fine-tune's checkpoint: the base model's, no audio tower.
AEON_MODULES = ("model.embed_vision", "model.language_model", "model.vision_tower")

HELD_OUT = {
    "gemma-3-12b-it (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma3_12b_bf16.log", "constructed_gemma3_12b_it_config.json"
    ),
    "gemma-3-12b-it fp8 KV (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma3_12b_fp8kv.log", "constructed_gemma3_12b_it_config.json"
    ),
    "gemma-3-12b-it rerun (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma3_12b_default.log", "constructed_gemma3_12b_it_config.json"
    ),
    "gemma-3-12b-it FlashInfer (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma3_12b_flashinfer.log",
        "constructed_gemma3_12b_it_config.json",
    ),
    "gemma-3-12b-it NVFP4 KV (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma3_12b_nvfp4kv.log", "constructed_gemma3_12b_it_config.json"
    ),
    "gemma-3-27b-it fp8 KV FlashInfer (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma3_27b_fp8kv_flashinfer.log",
        "constructed_gemma3_27b_it_config.json",
    ),
    "gemma-3-27b-it fp8 KV 128k (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma3_27b_fp8kv_128k.log",
        "constructed_gemma3_27b_it_config.json",
        needs=(
            (
                "available_kv",
                "vLLM's non-torch memory: 0.09 GiB in this log's own accounting, where the "
                "gemma-3-27b-it fp8 KV FlashInfer log, the same settings on the same machine "
                "three hours earlier, has 2.54 (the eager one 2.90). On GB10 vLLM measures it "
                "host-wide (total - psutil's available - torch's reserved, from the worker's "
                "start to the end of its profile), so what else the host takes or frees counts "
                "and no flag decides it",
            ),
        ),
    ),
    "gemma-4-26B-A4B-it (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_26b_bf16.log", "constructed_gemma4_26b_a4b_config.json"
    ),
    "gemma-4-26B-A4B-it fp8 KV (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_26b_fp8kv.log", "constructed_gemma4_26b_a4b_config.json"
    ),
    "gemma-4-26B-A4B-it rerun (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_26b_triton.log", "constructed_gemma4_26b_a4b_config.json"
    ),
    "gemma-4-26B-A4B-it QAT (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_26b_qat.log", "constructed_gemma4_26b_a4b_config.json"
    ),
    "gemma-4-31B-it (GB10, held out)": HeldOut("vllm_startup_gb10_heldout_gemma4_31b_bf16.log"),
    "gemma-4-E4B-it (GB10, held out)": HeldOut("vllm_startup_gb10_heldout_gemma4_e4b.log"),
    "Qwen3.6-35B fp8 KV (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_qwen36_fp8kv.log", "constructed_qwen36_35b_a3b_config.json"
    ),
    "Qwen3.6-35B NVFP4 KV (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_qwen36_nvfp4kv.log", "constructed_qwen36_35b_a3b_config.json"
    ),
    "Qwen3.6-35B + DFlash dev (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_qwen36_dflash_dev.log",
        no_tokens="the DFlash drafter's own KV layers are not known",
    ),
    "gemma-4-26B-A4B-it NVFP4 KV (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_26b_nvfp4kv.log", "constructed_gemma4_26b_a4b_config.json"
    ),
    "gemma-4-26B-A4B-it FlashInfer (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_26b_flashinfer.log",
        "constructed_gemma4_26b_a4b_config.json",
    ),
    "gemma-3-27b-it NVFP4 KV eager (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma3_27b_nvfp4kv_eager.log",
        "constructed_gemma3_27b_it_config.json",
        needs=(
            (
                "available_kv",
                "vLLM's non-torch memory: 2.90 GiB in this log's own accounting with "
                "--enforce-eager (no compile workers), more than the compiled runs of the same "
                "model on the same machine (0.09 and 2.54). Eager drops the CUDA graph term, "
                "which the model does (vLLM's estimate here: 0.0); the rest is host-wide "
                "memory vLLM counts as non-torch on GB10, not an input of the run",
            ),
        ),
    ),
    "gemma-4-12B-it NVFP4 KV (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_12b_nvfp4kv.log"
    ),
    "gemma-4-12B-it other build (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_12b_blockb.log"
    ),
    "gemma-4-31B-it cold (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_31b_bf16_cold.log"
    ),
    "Qwen3.8-Flash-Next TP2 sparkrun rank 0 (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_qwen38_tp2_sparkrun_rank0.log",
        needs=(
            (
                "available_kv",
                "vLLM's non-torch memory: 0.94 GiB by its own accounting (65.30 GiB of "
                "weights + non-torch less the 64.36 loaded), 0.50 estimated; the fitted TP2 "
                "log's two ranks of one run report -0.56 and +0.64. With it the rest is "
                "within budget: weights 0.46 GiB under (2.2 % over checkpoint / TP, as in the "
                "fitted TP2 log of this family) and peak activation 0.44 under (1.97 GiB at "
                "8,192 batched tokens), which follow this model's shape, and no config of it "
                "is at hand. This build's V2 model runner subtracts no CUDA graph estimate "
                "(the model's 0.05 GiB for the 4 tokens the recipe captures), a term the "
                "model cannot tell apart without the vLLM version",
            ),
        ),
    ),
    "gemma-4-26B fine-tune + DFlash (GB10, held out)": HeldOut(
        "vllm_startup_gb10_heldout_gemma4_26b_dflash.log",
        "constructed_aeon_gemma4_26b_a4b_nvfp4_config.json",
        no_tokens="the DFlash drafter's own KV layers are not known",
        compare_tokens=False,
        # What the checkpoint's 47,648 tensors hold: no audio tower (see
        # test_fine_tune_checkpoint_holds_no_audio_tower).
        modules=AEON_MODULES,
    ),
}

_CHECKPOINT = re.compile(r"Checkpoint size: ([\d.]+) GiB")
_LOADING = re.compile(r"Model loading took ([\d.]+) GiB")
_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
_AVAILABLE_KV = re.compile(r"Available KV cache memory: (-?[\d.]+) GiB")
_KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_DTYPE = re.compile(r"dtype=torch\.(\w+)")
_VOCAB = re.compile(r"\bvocab=(\d+)")
_FREE_ON_DEVICE = re.compile(r"Free memory on device \([\d.]+/([\d.]+) GiB\)")
_SPEC = re.compile(r"'speculative_config': (\{[^{}]*\})")
# vLLM's own non-torch figure: the DEBUG line of its memory profiling, or (V2 model runner)
# its "weights + non-torch" less the loaded weights.
_NON_TORCH = re.compile(r"(-?[\d.]+) GiB for non-torch memory")
_CONSUMED = re.compile(
    r"Actual usage is (-?[\d.]+) GiB for consumed memory \(weights \+ non-torch\)"
)
_CAPTURE_SIZES = re.compile(r"'cudagraph_capture_sizes': \[([\d, ]+)\]")
_SCALAR = re.compile(r"'(\w+)': ('[^']*'|-?\d+(?:\.\d+)?|True|False|None)(?=[,}])")


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def non_default_args(text: str) -> dict[str, object]:
    """The scalar values of vLLM's "non-default args: {...}" line.

    The line is a Python repr that may hold enum reprs (`<CompilationMode.NONE: 0>`), so
    scalars are read one by one rather than evaluated.
    """
    for line in text.splitlines():
        m = _NON_DEFAULT.search(line)
        if m:
            pairs = _SCALAR.findall(m.group(1))
            return {key: ast.literal_eval(value) for key, value in pairs}
    return {}


@dataclass
class WeightRow:
    """One log: checkpoint size read, TP x PP, predicted and logged weight memory per rank."""

    label: str
    checkpoint_gib: float
    shards: int
    predicted_gib: float
    logged_gib: float

    @property
    def error(self) -> float:
        return self.predicted_gib / self.logged_gib - 1


def _predict(
    checkpoint_gib: float,
    tp: int,
    pp: int,
    encoder: int | None = None,
    lm_only: bool = False,
    unbacked: int | None = None,
) -> float:
    facts = ModelFacts(
        model_id="sample",
        weight_bytes=int(checkpoint_gib * GIB),
        encoder_bytes=encoder,
        unbacked_encoder_bytes=unbacked,
    )
    argv = ["vllm", "serve", "sample", "-tp", str(tp), "-pp", str(pp)]
    args = parse_serve_args(argv + (["--language-model-only"] if lm_only else []))
    weights = weights_per_rank_bytes(facts, args, {})
    assert weights is not None
    return weights / GIB


def _encoder_bytes(name: str) -> int | None:
    """The multimodal encoders' size from the config of a held-out log's model, if given."""
    config = next((h.config for h in HELD_OUT.values() if h.fixture == name), None)
    if config is None:
        return None
    return facts_from_hf_config("sample", json.loads(_text(config)), None).encoder_bytes


def _unbacked_bytes(name: str) -> int | None:
    """An encoder a held-out log's config describes and its checkpoint lacks, if known."""
    held = next((h for h in HELD_OUT.values() if h.fixture == name), None)
    if held is None or held.config is None or held.modules is None:
        return None
    config = json.loads(_text(held.config))
    hub = HubFacts(repo_id="o/sample", revision="0" * 40, config=config, modules=held.modules)
    return facts_from_hub("o/sample", hub).unbacked_encoder_bytes


def weight_rows() -> list[WeightRow]:
    """Predicted vs logged weight memory for every sample with the inputs."""
    rows: list[WeightRow] = []
    head_args = non_default_args(_text(HEAD_LOG))
    logs = {**WEIGHT_LOGS, **{label: h.fixture for label, h in HELD_OUT.items()}}
    for label, name in logs.items():
        text = _text(name)
        # A speculative drafter in another checkpoint adds its size; an MTP drafter re-reads
        # the target's own checkpoint (the same size again) and adds nothing new.
        sizes = sorted({float(v) for v in _CHECKPOINT.findall(text)})
        loaded = [float(v) for v in _LOADING.findall(text)]
        args = non_default_args(text) or head_args
        tp = int(str(args.get("tensor_parallel_size", 1)))
        pp = int(str(args.get("pipeline_parallel_size", 1)))
        checkpoint = sum(sizes)
        lm_only = args.get("language_model_only") is True
        unbacked = _unbacked_bytes(name)
        predicted = _predict(checkpoint, tp, pp, _encoder_bytes(name), lm_only, unbacked)
        rows.append(WeightRow(label, checkpoint, tp * pp, predicted, loaded[-1]))
    rows.append(_gpt_oss_row())
    return rows


def _tsv_rows() -> dict[str, dict[str, str]]:
    lines = [ln for ln in _text("model_facts.tsv").splitlines() if not ln.startswith("#")]
    header = lines[0].split("\t")
    return {r.split("\t")[0]: dict(zip(header, r.split("\t"), strict=False)) for r in lines[1:]}


def _gpt_oss_row() -> WeightRow:
    """gpt-oss-120b on H100: its checkpoint size and loaded memory from model_facts.tsv."""
    rows = _tsv_rows()
    size = re.search(r"~([\d.]+) GiB for 120b", rows["gpt-oss-20b"]["weights_size"])
    logged = re.search(
        r"Model loading took ([\d.]+) GiB \(H100, vLLM 0\.14\.1\)",
        rows["gpt-oss-120b"]["observed_vllm_model_loading"],
    )
    assert size and logged
    checkpoint = float(size.group(1))
    return WeightRow(
        "gpt-oss-120b (H100)", checkpoint, 1, _predict(checkpoint, 1, 1), float(logged.group(1))
    )


@dataclass
class KvRow:
    """One KV comparison: what was predicted, what vLLM logged."""

    label: str
    quantity: str
    predicted: float
    logged: float

    @property
    def error(self) -> float:
        return self.predicted / self.logged - 1


def gemma_26b_kv_rows() -> list[KvRow]:
    """gemma-4-26B-A4B on GB10: KV tokens and concurrency from its config and the log's inputs."""
    text = _text("vllm_startup_gb10_gemma4_26b_single_node.log")
    args_seen = non_default_args(text)
    config = json.loads(_text("constructed_gemma4_26b_a4b_config.json"))
    facts = facts_from_hf_config("google/gemma-4-26B-A4B-it", config, None)
    dtype = _DTYPE.search(text)
    assert dtype
    facts.dtype = dtype.group(1)  # the engine's dtype line: the KV cache is "auto"
    max_len = int(str(args_seen["max_model_len"]))
    args = ServeArgs(
        model="google/gemma-4-26B-A4B-it",
        max_model_len=max_len,
        max_num_batched_tokens=int(str(args_seen["max_num_batched_tokens"])),
    )
    layout = layout_for(facts, args)
    assert layout is not None
    available = _AVAILABLE_KV.search(text)
    tokens = _KV_TOKENS.search(text)
    conc = _CONCURRENCY.search(text)
    assert available and tokens and conc
    budget = int(float(available.group(1)) * GIB)
    return [
        KvRow(
            "gemma-4-26B-A4B-it (GB10)",
            "KV tokens",
            layout.tokens(budget),
            int(tokens.group(1).replace(",", "")),
        ),
        KvRow(
            "gemma-4-26B-A4B-it (GB10)",
            f"concurrency @{max_len}",
            layout.max_concurrency(budget, max_len),
            float(conc.group(2)),
        ),
    ]


def gpt_oss_kv_needed_row() -> KvRow:
    """gpt-oss-120b on H100: KV one request at max seq len needs, vs vLLM's startup check."""
    text = _text("vllm_fail_kv_cache_gptoss120b_h100_valueerror.txt")
    m = re.search(r"max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed", text)
    assert m
    row = _tsv_rows()["gpt-oss-120b"]
    window = re.search(r"sliding_window (\d+) alternating", row["notes"])
    assert window
    layers = int(row["num_hidden_layers"])
    facts = ModelFacts(
        model_id="openai/gpt-oss-120b",
        num_hidden_layers=layers,
        num_attention_heads=int(row["num_attention_heads"]),
        num_key_value_heads=int(row["num_key_value_heads"]),
        head_dim=int(row["head_dim"]),
        attention="sliding_window",
        sliding_window=int(window.group(1)),
        full_attention_layers=layers // 2,  # alternating sliding / full
        dtype="bfloat16",  # tsv: non-expert tensors BF16
    )
    max_len = int(m.group(1))
    layout = layout_for(facts, ServeArgs(model="openai/gpt-oss-120b", max_model_len=max_len))
    assert layout is not None
    return KvRow(
        "gpt-oss-120b (H100)",
        f"KV needed @{max_len} (GiB)",
        layout.request_bytes(max_len) / GIB,
        float(m.group(2)),
    )


def kv_rows() -> list[KvRow]:
    """Every KV comparison the samples give inputs for."""
    return [*gemma_26b_kv_rows(), gpt_oss_kv_needed_row()]


def gb10_kv_logs() -> list[str]:
    """Every GB10 startup log of the set that reports vLLM's "Available KV cache memory"."""
    names = []
    for path in sorted(FIXTURES.iterdir()):
        if path.suffix not in (".log", ".txt"):
            continue
        text = path.read_text(encoding="utf-8")
        first = text.splitlines()[0] if text else ""
        if "GB10" in first and "NOT a Spark" not in first and _AVAILABLE_KV.search(text):
            names.append(path.name)
    return names


def _serve_args(text: str) -> ServeArgs:
    """The log's `vllm serve` settings, through the same parser `check` uses."""
    seen = non_default_args(text)
    argv = ["vllm", "serve", str(seen.get("model", "sample"))]
    for key in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "gpu_memory_utilization",
        "max_num_batched_tokens",
        "max_num_seqs",
        "max_model_len",
        "kv_cache_dtype",
    ):
        if key in seen:
            argv += ["--" + key.replace("_", "-"), str(seen[key])]
    if seen.get("enforce_eager") is True:
        argv.append("--enforce-eager")
    if seen.get("language_model_only") is True:
        argv.append("--language-model-only")
    if seen.get("attention_backend"):
        argv += ["--attention-backend", str(seen["attention_backend"])]
    spec = _SPEC.search(text)
    if spec:
        argv += ["--speculative-config", json.dumps(ast.literal_eval(spec.group(1)))]
    compilation: dict[str, object] = {}
    if "'compilation_config': {'mode': <CompilationMode.NONE: 0>" in text:
        compilation["mode"] = 0
    line = next((ln for ln in text.splitlines() if _NON_DEFAULT.search(ln)), "")
    sizes = _CAPTURE_SIZES.search(line)  # what the command named, not what vLLM resolved
    if sizes:
        compilation["cudagraph_capture_sizes"] = [int(n) for n in sizes.group(1).split(",")]
    if compilation:
        argv += ["--compilation-config", json.dumps(compilation)]
    return parse_serve_args(argv)


@dataclass
class AvailableKvRow:
    """One rank: vLLM's "Available KV cache memory" against budget - weights - overhead,
    and, where the log prints vLLM's own non-torch figure, the prediction given it."""

    label: str
    util: float
    total_gib: float
    weights_gib: float
    overhead: RuntimeOverhead
    predicted_gib: float
    logged_gib: float
    non_torch_gib: float | None = None
    predicted_given_gib: float | None = None

    @property
    def error(self) -> float:
        return self.predicted_gib / self.logged_gib - 1

    @property
    def error_given(self) -> float | None:
        if self.predicted_given_gib is None:
            return None
        return self.predicted_given_gib / self.logged_gib - 1


def logged_non_torch_gib(text: str) -> float | None:
    """vLLM's own non-torch figure in a log: its memory accounting's DEBUG line, or the
    "weights + non-torch" of the V2 model runner less "Model loading took"."""
    m = _NON_TORCH.search(text)
    if m:
        return float(m.group(1))
    consumed, loaded = _CONSUMED.search(text), _LOADING.findall(text)
    if consumed and loaded:
        return round(float(consumed.group(1)) - float(loaded[-1]), 2)
    return None


_SOURCE_REPO = re.compile(r"^# source: https://github\.com/([^/\s]+/[^/\s]+)/")
_FREE_B_TOTAL = re.compile(r"^Mem:\s+(\d+)\s", re.MULTILINE)
_GRAPH_EQUIVALENT = re.compile(
    r"Estimated CUDA graph memory: ([\d.]+) GiB.*?--gpu-memory-utilization=([\d.]+) is "
    r"equivalent to --gpu-memory-utilization=([\d.]+)",
    re.DOTALL,
)


def source_repo(text: str) -> str | None:
    """The GitHub repository a fixture was copied from (its first line), if it says."""
    m = _SOURCE_REPO.search(text.splitlines()[0]) if text else None
    return m.group(1) if m else None


def machine_totals_gib() -> dict[str, float]:
    """Each source repository's GB10 memory, from the `free -b` it published.

    On GB10 vLLM reads the total from cudaMemGetInfo, which on this unified-memory part is
    the kernel's MemTotal: the machines differ (119.63 GiB on one, 121.69 on another), and
    `check` budgets util x the node's own MemTotal, so each log is held to its machine's.
    """
    totals = {}
    for path in sorted(FIXTURES.glob("free_b_*.txt")):
        text = path.read_text(encoding="utf-8")
        repo, m = source_repo(text), _FREE_B_TOTAL.search(text)
        if repo and m:
            totals[repo] = round(int(m.group(1)) / GIB, 2)
    return totals


def log_total_gib(text: str) -> float:
    """The memory of the GB10 a log ran on, as vLLM saw it: the log's own "Free memory on
    device (x/T GiB)", else the `free -b` total its source repository published."""
    m = _FREE_ON_DEVICE.search(text)
    if m:
        return float(m.group(1))
    repo = source_repo(text)
    totals = machine_totals_gib()
    assert repo in totals, f"no memory total for the machine of {repo}: add its `free -b`"
    return totals[repo]


def graph_equivalent_total_range(text: str) -> tuple[float, float] | None:
    """The total memory vLLM's CUDA graph line implies, within the rounding of its figures.

    vLLM prints the CUDA graph estimate (2 decimals of GiB) and the utilization it equals
    without it (4 decimals): util - estimate / total, so the pair bounds the total.
    """
    m = _GRAPH_EQUIVALENT.search(text)
    if not m:
        return None
    estimate, util, equivalent = (float(v) for v in m.groups())
    gap = util - equivalent
    if gap <= 0.00005:
        return None
    return (estimate - 0.005) / (gap + 0.00005), (estimate + 0.005) / (gap - 0.00005)


def available_kv_rows() -> list[AvailableKvRow]:
    """Predicted vs logged available KV memory, one row per GB10 log (each rank its own)."""
    labels = {name: label for label, name in WEIGHT_LOGS.items()}
    labels.update({h.fixture: label for label, h in HELD_OUT.items()})
    configs = {h.fixture: h.config for h in HELD_OUT.values() if h.config is not None}
    weights = {r.label: r for r in weight_rows()}
    head_text = _text(HEAD_LOG)
    rows: list[AvailableKvRow] = []
    for name in gb10_kv_logs():
        text = _text(name)
        # A headless worker prints no serve args: the head's command is the one it runs.
        args_text = text if non_default_args(text) else head_text
        args = _serve_args(args_text)
        vocab = _VOCAB.search(text) or _VOCAB.search(args_text)
        facts = ModelFacts(model_id=args.model, vocab_size=int(vocab.group(1)) if vocab else None)
        config_name = configs.get(name)
        if name == "vllm_startup_gb10_gemma4_26b_single_node.log":
            config_name = "constructed_gemma4_26b_a4b_config.json"
        if config_name is not None:
            # The model's layers (its KV cache groups); the log's vocabulary where it has one.
            config = json.loads(_text(config_name))
            shape = facts_from_hf_config(args.model, config, None)
            facts = replace(shape, vocab_size=facts.vocab_size or shape.vocab_size)
        overhead = runtime_overhead(args, facts, unified=True)
        weight = weights[labels[name]].predicted_gib
        util = args.gpu_memory_utilization
        total = log_total_gib(text)
        predicted = util * total - weight - overhead.total_bytes / GIB
        non_torch = logged_non_torch_gib(text)
        given = None
        if non_torch is not None:
            measured = runtime_overhead(
                args, facts, unified=True, measured_non_torch_bytes=int(non_torch * GIB)
            )
            given = util * total - weight - measured.total_bytes / GIB
        logged = _AVAILABLE_KV.search(text)
        assert logged
        rows.append(
            AvailableKvRow(
                labels[name],
                util,
                total,
                weight,
                overhead,
                predicted,
                float(logged.group(1)),
                non_torch,
                given,
            )
        )
    return rows


def test_available_kv_memory_within_5_percent_on_every_fitted_gb10_log() -> None:
    rows = available_kv_rows()
    for r in rows:
        print(
            f"{r.label:40} predicted {r.predicted_gib:6.2f}  logged {r.logged_gib:6.2f}  "
            f"{r.error:+.1%}"
        )
    # Every GB10 log with the line is in the comparison, one row per rank; the held-out
    # ones are held to the budget one by one below.
    assert len(rows) == len(gb10_kv_logs()) == 6 + len(HELD_OUT)
    bad = [r for r in rows if abs(r.error) > 0.05 and r.label in WEIGHT_LOGS]
    assert not bad, bad


def test_gb10_weight_memory_within_3_percent() -> None:
    rows = [r for r in weight_rows() if "(GB10)" in r.label]
    assert len(rows) == 6
    bad = [r for r in rows if abs(r.error) > 0.03]
    assert not bad, bad


def test_overhead_terms_follow_the_settings_the_logs_differ_in() -> None:
    rows = {r.label: r.overhead for r in available_kv_rows()}
    tp2 = rows["Qwen3.8-Flash-Next TP2 rank 0 (GB10)"]
    dflash = rows["Qwen3.6-35B + DFlash (GB10)"]
    gemma = rows["gemma-4-31B-it (GB10)"]
    assert tp2.compile_bytes == 0 < gemma.compile_bytes  # compilation mode NONE vs Inductor
    assert dflash.activation_bytes == 32 * gemma.activation_bytes  # 65536 vs 2048 tokens
    # 128 requests x 16 tokens (15 drafts + 1) of logits vs 256 requests x 1.
    assert dflash.sampler_bytes == 8 * gemma.sampler_bytes
    assert tp2.cuda_graph_bytes < gemma.cuda_graph_bytes  # 48 vs 512 captured tokens


def test_weight_memory_within_5_percent_on_every_sample() -> None:
    rows = weight_rows()
    for r in rows:
        print(
            f"{r.label:40} ckpt {r.checkpoint_gib:7.2f} GiB /{r.shards}  "
            f"predicted {r.predicted_gib:6.2f}  logged {r.logged_gib:6.2f}  {r.error:+.1%}"
        )
    models = {r.label.split(" TP2")[0] for r in rows}
    assert len(models) >= 5
    bad = [r for r in rows if abs(r.error) > 0.05]
    assert not bad, bad


def test_kv_predictions_within_10_percent() -> None:
    rows = kv_rows()
    for r in rows:
        print(
            f"{r.label:28} {r.quantity:24} predicted {r.predicted:12.2f} "
            f"logged {r.logged:12.2f}  {r.error:+.2%}"
        )
    assert len(rows) == 3
    bad = [r for r in rows if abs(r.error) > 0.10]
    assert not bad, bad


def test_samples_parse_as_expected() -> None:
    # Guards the parsing itself: the numbers the comparisons read out of the fixtures.
    rows = {r.label: r for r in weight_rows()}
    assert rows["Qwen3.8-Flash-Next TP2 rank 1 (GB10)"].shards == 2
    assert rows["Qwen3.8-Flash-Next TP2 rank 0 (GB10)"].checkpoint_gib == pytest.approx(123.57)
    assert rows["Qwen3.6-35B + DFlash (GB10)"].checkpoint_gib == pytest.approx(21.75 + 0.88)
    assert rows["gpt-oss-120b (H100)"].logged_gib == pytest.approx(64.38)
    assert rows["gemma-4-E4B-it (sm120)"].logged_gib == pytest.approx(15.19)


def test_each_log_is_held_to_its_machines_total() -> None:
    # vLLM's CUDA graph line (the estimate and the utilization it equals without it)
    # bounds the total of the machine the log ran on: the total each row uses lies within,
    # and the machines differ, so no one total serves every log.
    checked = 0
    for r, name in zip(available_kv_rows(), gb10_kv_logs(), strict=True):
        bounds = graph_equivalent_total_range(_text(name))
        if bounds is None:
            continue
        low, high = bounds
        assert low <= r.total_gib <= high, (r.label, r.total_gib, bounds)
        checked += 1
    assert checked >= 15
    totals = {r.total_gib for r in available_kv_rows()}
    assert totals == {119.63, 121.69}
    # The `free -b` a source published agrees with what vLLM printed on that machine.
    own = _FREE_ON_DEVICE.search(_text("vllm_startup_gb10_heldout_gemma3_27b_fp8kv_128k.log"))
    assert own and machine_totals_gib()["jethac/dgx-spark-hijinks"] == float(own.group(1))


_DESIRED = re.compile(r"Desired GPU memory utilization is \(([\d.]+), ([\d.]+) GiB\)")


def test_checks_budget_from_memtotal_is_vllms_on_the_same_machine() -> None:
    # `check` budgets util x the node's MemTotal (the probe reads /proc/meminfo); on GB10
    # that is vLLM's own budget: the machine's published `free -b` total against the
    # "Desired GPU memory utilization" its vLLM printed.
    text = _text("vllm_startup_gb10_heldout_gemma3_27b_fp8kv_128k.log")
    desired = _DESIRED.search(text)
    free_b = _FREE_B_TOTAL.search(_text("free_b_gb10.txt"))
    assert desired and free_b
    budget = Budget(float(desired.group(1))).bytes_of(int(free_b.group(1)))
    assert f"{budget / GIB:.2f}" == desired.group(2)


def test_compile_workers_constant_is_read_from_the_fitted_logs_only() -> None:
    # The least-squares fit of the relative error over the compiled fitted logs, each at its
    # machine's total: the held-out logs play no part in it.
    implied, weights = [], []
    for r in available_kv_rows():
        if r.label in WEIGHT_LOGS and r.overhead.compile_bytes:
            implied.append(r.overhead.compile_bytes / GIB + r.predicted_gib - r.logged_gib)
            weights.append(1 / r.logged_gib**2)
    assert len(implied) == 4
    fitted = sum(c * w for c, w in zip(implied, weights, strict=True)) / sum(weights)
    assert COMPILE_WORKERS_BYTES / GIB == pytest.approx(fitted, abs=0.01)


_ENGINE_VERSION = re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\)")
_RELEASE = re.compile(r"^(\d+)\.(\d+)")


def vllm_version(text: str) -> tuple[int, int] | None:
    """The log's vLLM (major, minor), or None for the newest.

    A source build without release tags calls itself 0.1.devN+g<commit>: those in the set
    are builds of vLLM's main branch after 0.21 (their logs say CUDA graph profiling is
    "default since v0.21.0"), so they count as the newest.
    """
    m = _ENGINE_VERSION.search(text)
    if not m or m.group(1).startswith("0.1.dev"):
        return None
    release = _RELEASE.match(m.group(1))
    return (int(release.group(1)), int(release.group(2))) if release else None


@dataclass
class HeldOutRow:
    """One held-out log: predicted and logged figures (None where the log lacks the inputs)."""

    label: str
    version: str
    weights: WeightRow
    available: AvailableKvRow
    tokens: KvRow | None

    def errors(self) -> dict[str, float]:
        out = {"weights": self.weights.error, "available_kv": self.available.error}
        if self.tokens is not None:
            out["kv_tokens"] = self.tokens.error
        return out

    def errors_given(self) -> dict[str, float]:
        """The errors given the inputs the log prints (vLLM's own non-torch figure)."""
        out = self.errors()
        if self.available.error_given is not None:
            out["available_kv"] = self.available.error_given
        return out


BUDGETS = {"weights": 0.03, "available_kv": 0.05, "kv_tokens": 0.02}


def held_out_kv_tokens(label: str) -> KvRow | None:
    """KV tokens predicted from the model's config and the log's own inputs and budget."""
    held = HELD_OUT[label]
    if held.config is None or not held.compare_tokens:
        return None
    text = _text(held.fixture)
    args = _serve_args(text)
    config = json.loads(_text(held.config))
    facts = facts_from_hf_config(args.model, config, None)
    dtype = _DTYPE.search(text)
    if dtype:
        facts.dtype = dtype.group(1)  # the engine's dtype: what "auto" KV follows
    layout = layout_for(facts, args)
    available = _AVAILABLE_KV.findall(text)
    tokens = _KV_TOKENS.search(text)
    assert layout is not None and available and tokens and args.max_model_len
    budget = int(float(available[-1]) * GIB)
    predicted = layout.reported_tokens(budget, args.max_model_len, vllm_version(text))
    return KvRow(label, "KV tokens", predicted, int(tokens.group(1).replace(",", "")))


def held_out_rows() -> list[HeldOutRow]:
    """Every held-out log's figures, in HELD_OUT's order."""
    weights = {r.label: r for r in weight_rows()}
    available = {r.label: r for r in available_kv_rows()}
    rows = []
    for label, held in HELD_OUT.items():
        m = _ENGINE_VERSION.search(_text(held.fixture))
        rows.append(
            HeldOutRow(
                label,
                m.group(1) if m else "?",
                weights[label],
                available[label],
                held_out_kv_tokens(label),
            )
        )
    return rows


def _held_out_cases() -> list[object]:
    cases: list[object] = []
    for label, held in HELD_OUT.items():
        for figure in BUDGETS:
            if figure == "kv_tokens" and (held.config is None or not held.compare_tokens):
                continue  # the log gives no model facts to predict tokens from
            why = dict(held.misses).get(figure)
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            suffix = "-given-non-torch" if figure in dict(held.needs) else ""
            cases.append(
                pytest.param(label, figure, marks=marks, id=f"{held.fixture}-{figure}{suffix}")
            )
    return cases


@pytest.mark.parametrize(("label", "figure"), _held_out_cases())
def test_held_out_log_within_budget(label: str, figure: str) -> None:
    row = next(r for r in held_out_rows() if r.label == label)
    needed = dict(HELD_OUT[label].needs).get(figure)
    if needed:
        # Held given the input the log prints; without it the figure is only reported.
        assert row.available.error_given is not None, (label, "the log lacks", needed)
        error = row.errors_given()[figure]
        print(f"{label}: {figure} {row.errors()[figure]:+.2%} without {needed.split(':')[0]}")
    else:
        error = row.errors()[figure]
    print(f"{label}: {figure} {error:+.2%} (budget {BUDGETS[figure]:.0%})")
    assert abs(error) <= BUDGETS[figure], (label, figure, f"{error:+.2%}")


def test_available_kv_given_vllms_non_torch_within_5_percent_where_logged() -> None:
    # Every GB10 log that prints vLLM's own non-torch figure, fitted or held out: with it
    # in place of the estimate, weights, activation, sampler and CUDA graph terms are left.
    rows = [r for r in available_kv_rows() if r.error_given is not None]
    for r in rows:
        print(f"{r.label:56} non-torch {r.non_torch_gib:+.2f} GiB  {r.error_given:+.1%}")
    assert {r.label for r in rows} >= {
        "Qwen3.8-Flash-Next TP2 rank 0 (GB10)",
        "Qwen3.8-Flash-Next TP2 rank 1 (GB10)",
        "gemma-3-27b-it fp8 KV 128k (GB10, held out)",
        "gemma-3-27b-it fp8 KV FlashInfer (GB10, held out)",
        "gemma-3-27b-it NVFP4 KV eager (GB10, held out)",
        "Qwen3.8-Flash-Next TP2 sparkrun rank 0 (GB10, held out)",
    }
    bad = [(r.label, f"{r.error_given:+.1%}") for r in rows if abs(r.error_given or 0) > 0.05]
    assert not bad, bad


def test_logged_non_torch_reads_both_accountings() -> None:
    eager = _text("vllm_startup_gb10_heldout_gemma3_27b_nvfp4kv_eager.log")
    assert logged_non_torch_gib(eager) == pytest.approx(2.90)
    # V2 model runner: 65.3 GiB of weights + non-torch, 64.36 loaded.
    tp2 = _text("vllm_startup_gb10_heldout_qwen38_tp2_sparkrun_rank0.log")
    assert logged_non_torch_gib(tp2) == pytest.approx(0.94)
    assert logged_non_torch_gib(_text("vllm_startup_gb10_gemma4_12b.log")) is None


def test_needed_inputs_are_the_ones_the_logs_print() -> None:
    # A log may be held "given" an input only if it prints it; the rest stay unconditional.
    for label, held in HELD_OUT.items():
        printed = logged_non_torch_gib(_text(held.fixture)) is not None
        assert not held.needs or printed, label
        assert not set(dict(held.needs)) & set(dict(held.misses)), label


def test_language_model_only_skips_what_the_vision_config_sizes() -> None:
    # The same gemma-4-26B checkpoint loads 48.50 GiB whole (the fitted log) and 47.47 GiB
    # with --language-model-only: the vision tower its config describes is what is left out.
    rows = {r.label: r for r in weight_rows()}
    whole = rows["gemma-4-26B-A4B-it (GB10)"].logged_gib
    lm_only = rows["gemma-4-26B-A4B-it (GB10, held out)"].logged_gib
    skipped = _encoder_bytes("vllm_startup_gb10_heldout_gemma4_26b_bf16.log")
    assert skipped is not None
    print(f"skipped {whole - lm_only:.2f} GiB, vision tower {skipped / GIB:.2f} GiB")
    assert skipped / GIB == pytest.approx(whole - lm_only, rel=0.05)


_CARD_ROW = re.compile(r"^\| (Model Size on Disk|VRAM Loaded) \| ([\d.]+) GB \|$", re.MULTILINE)
FINE_TUNE_DFLASH = "gemma-4-26B fine-tune + DFlash (GB10, held out)"


def test_fine_tune_dflash_weight_miss_lies_in_its_target() -> None:
    # The target's publisher gives its load without a drafter (vLLM 0.19.1rc1). Its "15.3 GB"
    # on disk is the log's "Checkpoint size: 15.30 GiB": the card quotes vLLM's GiB figures.
    # From its checkpoint alone the fit misses that target beyond the budget; with the audio
    # tower vLLM builds from the config (the checkpoint lacks it) it is within, and so is
    # the drafter's share of the log's load.
    card = dict(_CARD_ROW.findall(_text("aeon_gemma4_26b_a4b_nvfp4_model_card.md")))
    held = HELD_OUT[FINE_TUNE_DFLASH]
    text = _text(held.fixture)
    target, drafter = (float(v) for v in _CHECKPOINT.findall(text))
    assert f"{target:.1f}" == card["Model Size on Disk"]
    alone, whole = float(card["VRAM Loaded"]), float(_LOADING.findall(text)[-1])
    tower = _unbacked_bytes(held.fixture)
    assert tower is not None
    bare = _predict(target, 1, 1) / alone - 1
    error = _predict(target, 1, 1, unbacked=tower) / alone - 1
    print(f"target alone {bare:+.2%} from its checkpoint, {error:+.2%} with the audio tower")
    assert bare < -BUDGETS["weights"] < error < BUDGETS["weights"]
    drafter_miss = whole - alone - _predict(drafter, 1, 1)
    print(f"the drafter's part {drafter_miss:.2f} GiB of {whole}")
    assert 0 < drafter_miss / whole <= BUDGETS["weights"]


_TENSOR_COUNT = re.compile(r"total tensor count in this model is \*\*([\d,]+)\*\*")
_RESTORED = re.compile(
    r"De-quantized (\d+) vision tower tensors .*?, (\d+) router tensors .*?, and (\d+) "
    r"embedding projection tensors"
)
# compressed-tensors' NVFP4 linear: weight_packed, weight_scale, weight_global_scale and
# input_global_scale.
NVFP4_TENSORS = 4


def test_fine_tune_checkpoint_holds_no_audio_tower() -> None:
    # The publisher counts 47,648 tensors in the checkpoint. Rebuilt from the base model's
    # tensors as transformers names them (gemma4_tensors_transformers.json), with the
    # language model's linears and experts at NVFP4 and what the README says it restored
    # to bf16 (the vision tower, the routers, the vision projector), the count is met within
    # 2 without an audio tower; any Gemma 4 audio tower would add hundreds.
    card = _text("aeon_gemma4_26b_a4b_nvfp4_model_card.md")
    total = int(_TENSOR_COUNT.search(card).group(1).replace(",", ""))  # type: ignore[union-attr]
    restored = _RESTORED.search(card)
    assert restored and total == 47_648
    vision_q, router_q, projector_q = (int(g) for g in restored.groups())
    built = json.loads(_text("gemma4_tensors_transformers.json"))
    config = json.loads(_text(HELD_OUT[FINE_TUNE_DFLASH].config or ""))["text_config"]
    layer = built["language_model_layer_0"]
    linears = [n for n in layer if n.endswith("_proj.weight") and not n.startswith("router.")]
    fused = [n for n in layer if n.startswith("experts.")]
    plain = len(layer) - len(linears) - len(fused)  # norms, scalars, router (bf16 again)
    full = config["layer_types"].count("full_attention")
    shared_kv = full if config["attention_k_eq_v"] else 0  # no v_proj where K is V
    layers = config["num_hidden_layers"]
    quantized_linears = layers * len(linears) - shared_kv
    experts = layers * config["num_experts"] * 3 * NVFP4_TENSORS  # gate, up, down each
    lm_outer = built["modules"]["model.language_model"]["tensors"] - layers * len(layer) + shared_kv
    language = lm_outer + layers * plain + NVFP4_TENSORS * quantized_linears + experts
    vision = built["modules"]["model.vision_tower"]["tensors"]
    projector = built["modules"]["model.embed_vision"]["tensors"]
    # The README's restored tensors are this architecture's: four NVFP4 tensors for each
    # vision linear (q, k, v, o, gate, up, down per layer and the patch projection), router
    # and the vision projector, now one bf16 tensor each (as transformers counts them).
    vision_layers = json.loads(_text(HELD_OUT[FINE_TUNE_DFLASH].config or ""))["vision_config"]
    assert vision_q == NVFP4_TENSORS * (7 * vision_layers["num_hidden_layers"] + 1)
    assert router_q == NVFP4_TENSORS * layers and projector_q == NVFP4_TENSORS * projector
    without = language + vision + projector
    print(f"checkpoint {total} tensors; rebuilt without an audio tower {without}")
    assert abs(total - without) <= 2
    for tower in built["audio"]:
        assert tower["tensors"] + 1 > 100 * abs(total - without)  # tower and its projector
    assert not any("audio" in m for m in AEON_MODULES)


def test_held_out_logs_are_not_the_fitted_ones() -> None:
    fitted = set(WEIGHT_LOGS.values())
    held = [h.fixture for h in HELD_OUT.values()]
    assert not fitted & set(held)
    for name in held:
        first = _text(name).splitlines()[0]
        assert first.startswith("# source: https://github.com/") and "held out" in first, name
        # The excerpt still carries every input and figure the comparison reads.
        text = _text(name)
        assert _LOADING.search(text) and _AVAILABLE_KV.search(text) and _KV_TOKENS.search(text)
        assert non_default_args(text), name


def test_kv_token_count_follows_the_vllm_version() -> None:
    # vLLM 0.20 counted blocks per group; from 0.21 on, concurrency x max_model_len.
    config = json.loads(_text("constructed_gemma4_26b_a4b_config.json"))
    facts = facts_from_hf_config("google/gemma-4-26B-A4B-it", config, None)
    facts.dtype = "bfloat16"
    layout = layout_for(facts, ServeArgs(model="m", max_model_len=8192))
    assert layout is not None
    budget = int(40.61 * GIB)
    old = layout.reported_tokens(budget, 8192, (0, 20))
    new = layout.reported_tokens(budget, 8192, None)
    assert old == layout.tokens(budget)
    assert new == int(layout.max_concurrency(budget, 8192) * 8192) > old
    assert vllm_version("Initializing a V1 LLM engine (v0.20.1) with") == (0, 20)
    assert vllm_version("Initializing a V1 LLM engine (v0.1.dev1+g9759e3b06) with") is None


_BLOCK = re.compile(r"Setting attention block size to (\d+) tokens")


@pytest.mark.parametrize(
    "fixture",
    ["vllm_startup_gb10_heldout_qwen36_fp8kv.log", "vllm_startup_gb10_heldout_qwen36_nvfp4kv.log"],
)
def test_hybrid_attention_block_matches_the_log(fixture: str) -> None:
    # vLLM grows the attention block until a page holds one Gated DeltaNet state (conv in
    # bf16, recurrent state in float32): 2096 tokens of fp8 KV, 3728 of NVFP4 KV.
    text = _text(fixture)
    config = json.loads(_text("constructed_qwen36_35b_a3b_config.json"))
    facts = facts_from_hf_config("Qwen3.6-35B", config, None)
    layout = layout_for(facts, _serve_args(text))
    logged = _BLOCK.search(text)
    assert layout is not None and logged
    assert layout.attention_block_size() == int(logged.group(1))


# --- the spread of vLLM's non-torch figure: check's KV margin warning -------------------


def test_spread_is_the_one_measured_between_starts_of_one_setting() -> None:
    # The three gemma-3-27b-it starts on one machine with one model and budget: vLLM's own
    # non-torch figures in their logs, 0.09, 2.54 and 2.90 GiB.
    figures = []
    for h in HELD_OUT.values():
        if "gemma3_27b" in h.fixture:
            figure = logged_non_torch_gib(_text(h.fixture))
            assert figure is not None
            figures.append(figure)
    assert sorted(figures) == [0.09, 2.54, 2.90]
    assert NON_TORCH_SPREAD_BYTES == round((max(figures) - min(figures)) * GIB)


def test_gb10_logs_are_consistent_with_the_margin() -> None:
    # Every GB10 log's start passed vLLM's "max seq len" check. Where the model's config
    # gives the KV one request of the log's max_model_len needs, `check` must not have
    # refused it (predicted KV below one request). A start whose real margin was within the
    # spread is one `check` may warn of but must not refuse; none of these had one (the
    # closest held 33.0 GiB over one request), so the warning has no real start against it.
    configs = {h.fixture: h.config for h in HELD_OUT.values() if h.config is not None}
    configs["vllm_startup_gb10_gemma4_26b_single_node.log"] = (
        "constructed_gemma4_26b_a4b_config.json"
    )
    rows = available_kv_rows()
    held = 0
    for name, row in zip(gb10_kv_logs(), rows, strict=True):
        if name not in configs:
            continue
        text = _text(name)
        args = _serve_args(text if non_default_args(text) else _text(HEAD_LOG))
        facts = facts_from_hf_config(args.model, json.loads(_text(configs[name])), None)
        dtype = _DTYPE.search(text)
        facts.dtype = facts.dtype or (dtype.group(1) if dtype else None)
        layout = layout_for(facts, args)
        length = args.max_model_len or facts.max_position_embeddings
        if layout is None or not length:
            continue
        need = layout.request_bytes(length) / GIB
        predicted, real = row.predicted_gib - need, row.logged_gib - need
        print(f"{row.label:52} predicted margin {predicted:6.2f} real {real:6.2f} GiB")
        assert real >= 0, row.label  # the log's own start
        assert predicted >= 0, row.label  # check would not have refused it
        held += 1
    assert held >= 17


def test_the_spread_covers_every_gb10_logs_over_prediction() -> None:
    # What makes a margin of the spread enough: on no GB10 log is the available KV predicted
    # higher than vLLM found by more (the eager gemma-3-27b start, 2.79 GiB, is the most).
    # A log whose miss lies in its weights (a known xfail: memory no checkpoint accounts for)
    # is left out: that miss is no part of non-torch memory.
    weight_misses = {
        label for label, h in HELD_OUT.items() if any(k == "weights" for k, _ in h.misses)
    }
    over = {
        r.label: r.predicted_gib - r.logged_gib
        for r in available_kv_rows()
        if r.label not in weight_misses
    }
    worst = max(over, key=lambda k: over[k])
    assert worst == "gemma-3-27b-it NVFP4 KV eager (GB10, held out)"
    assert 0 < over[worst] * GIB <= NON_TORCH_SPREAD_BYTES

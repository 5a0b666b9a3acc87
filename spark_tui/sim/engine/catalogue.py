"""SIMULATED model catalogue: the facts the simulated engine (and the simulated nodes' Hugging
Face caches) use for every bundled recipe's model and the seeds' models.

Real facts come from `shared/reference/model_facts.tsv`, the vLLM logs next to it and the
bundled recipes' `facts_sources`; where no public source exists the value is SIMULATED
(invented, plausible, chosen for the demo's story) and flagged here and in the generated
`config.json` (`"spark_tui_simulated": true`).

| model | value | source |
|---|---|---|
| nvidia/GLM-5.3-Flash-FP4-Local | every architecture fact, weights 114.6 GiB, 1.6 GiB replicated per rank | SIMULATED: MLA (kv_lora_rank 512 + qk_rope 64) over 45 layers, 64 heads (TP2 divides, TP3 not), so that TP2 on two 128 GB Sparks at util 0.87 gives 58.1 GiB weights/rank, ~34 GiB KV, 1 req @500k = 12.1 GiB, ~2.8x; two 64 GB Sparks cannot hold 58.1 GiB |
| nvidia/GLM-5.3-Flash-FP4-Local | activation 3.36 MB/token | SIMULATED: B12X MLA/sparse-indexer + MoE + MTP workspace, ~12.8 GiB at 4096 batched tokens |
| nvidia/Qwen3.8-Flash-Next-* | checkpoint 123.57 GiB, PLE table 47.7 GiB, 11 shards, vocab 248320, Qwen4ExpForConditionalGeneration, 512 experts | real: model_facts.tsv, vllm_multinode_tp2_*.log, sglang#37995 |
| nvidia/Qwen3.8-Flash-Next-* | 2.69 GiB replicated per rank | SIMULATED, calibrated: (123.57-47.7-2.69)/2 + 2.69 + 47.7/2 = 63.13 GiB/rank, the logged TP2 load |
| nvidia/Qwen3.8-Flash-Next-* | 40 layers (20 full attention, 20 Gated DeltaNet), 32 heads, 2 KV heads x 256, hidden 4096 | SIMULATED: 20 x 2 x 1 x 256 x 1 B = 10240 B/token/rank at TP2 fp8, which reproduces the logged 2.25M vs 2,318,574 KV tokens for 21.47 GiB |
| nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 | 52 layers (6 attention, 23 Mamba-2), 32 heads, 2 KV x 128, hidden 2688, 17e9 bytes, 128/6 experts, 262144 positions | real: model_facts.tsv, bundled recipe |
| nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 | ssm_state_size 128, 4 shards | SIMULATED |
| openai/gpt-oss-120b | 36 layers (18 sliding 128 / 18 full), 64 heads, 8 KV x 64, hidden 2880, 131072, 65283502899 bytes, 128/4 experts | real: model_facts.tsv, bundled recipe |
| nvidia/Qwen3.6-35B-A3B-NVFP4 | 40 layers (10 full + 30 Gated DeltaNet), 16 heads, 2 KV x 256, hidden 2048, 262144 | real: bundled recipe (model card) |
| nvidia/Qwen3.6-35B-A3B-NVFP4 | weights 21.75 GiB, 5 shards | SIMULATED: the checkpoint size of the compressed-tensors Qwen3.6-35B fine-tune in vllm_startup_gb10_qwen36_dflash_specdec.log (same architecture) |
| meta-llama/Llama-3.3-70B-Instruct | 80 layers, 64 heads, 8 KV x 128, hidden 8192, 131072, 141125877760 bytes, gated | real: model_facts.tsv, bundled recipe |
| Qwen/Qwen3-30B-A3B, Qwen3-8B, Qwen3-32B, zai-org/GLM-4.5-Air(-FP8), Nemotron-Nano-9B-v2, gpt-oss-20b | architecture | real: model_facts.tsv (sizes marked derived there) |
| Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B | architecture, size | derived from the public Qwen3 configs (vLLM's default model is Qwen3-0.6B) |
| z-lab/Qwen3.6-35B-A3B-DFlash | 0.88 GiB draft | real: vllm_startup_gb10_qwen36_dflash_specdec.log |
| every model | params_total/params_active, expert_fraction, shard counts not named above | SIMULATED (timing model inputs) |
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

GIB = 2**30

ATTENTION_KINDS = ("full", "sliding_window", "mla", "hybrid")


@dataclass(frozen=True)
class ModelSpec:
    """Facts about one model: sizes, architecture, attention layout, behaviour in the API."""

    model_id: str
    architecture: str
    model_type: str
    weight_bytes: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    max_position_embeddings: int
    attention: str
    full_attention_layers: int
    params_total: float
    params_active: float
    aliases: tuple[str, ...] = ()
    simulated: bool = False
    sources: str = ""
    dtype: str = "bfloat16"
    quant_method: str | None = None
    replicated_bytes: int = 0
    ple_bytes: int = 0
    sliding_window_layers: int = 0
    sliding_window: int | None = None
    linear_layers: int = 0
    linear_kind: str | None = None
    linear_state_bytes: int = 0  # per linear layer, per sequence, whole model (TP splits it)
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    experts_total: int = 0
    experts_active: int = 0
    expert_fraction: float = 0.0
    mtp_layers: int = 0
    num_shards: int = 1
    activation_bytes_per_token: int | None = None
    intermediate_size: int = 0
    reasons: bool = False
    gated: bool = False
    draft_only: bool = False
    extra_config: dict[str, Any] = field(default_factory=dict)

    @property
    def activation_per_token(self) -> int:
        """Peak activation bytes per batched token during profiling (default 73 x hidden size,
        calibrated on the 1.14 GiB peak at 4096 tokens in vllm_multinode_tp2_head_rank0.log)."""
        if self.activation_bytes_per_token is not None:
            return self.activation_bytes_per_token
        return 73 * self.hidden_size

    @property
    def is_moe(self) -> bool:
        """Whether the model routes tokens to experts."""
        return self.experts_total > 0


def _gib(x: float) -> int:
    return int(round(x * GIB))


def _qwen3(
    model_id: str,
    sources: str,
    *,
    weight_bytes: int,
    layers: int,
    heads: int,
    kv_heads: int,
    hidden: int,
    intermediate: int,
    params: float,
    shards: int,
) -> ModelSpec:
    """A dense Qwen3 model: full attention in every layer, 128-wide heads, the Qwen3 vocabulary
    and context, a reasoning model."""
    return ModelSpec(
        model_id=model_id,
        sources=sources,
        architecture="Qwen3ForCausalLM",
        model_type="qwen3",
        weight_bytes=weight_bytes,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=128,
        hidden_size=hidden,
        intermediate_size=intermediate,
        vocab_size=151936,
        max_position_embeddings=40960,
        attention="full",
        full_attention_layers=layers,
        params_total=params,
        params_active=params,
        num_shards=shards,
        reasons=True,
    )


_NEMOTRON_3_LAYOUT = {
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "mamba_num_heads": 64,
    "mamba_head_dim": 64,
    "ssm_state_size": 128,
}

_NEMOTRON_3_NANO = ModelSpec(
    model_id="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4",
    aliases=("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8",),
    sources="model_facts.tsv; bundled recipe nemotron-3-nano-30b-a3b-nvfp4",
    architecture="NemotronHForCausalLM",
    model_type="nemotron_h",
    weight_bytes=17_000_000_000,
    quant_method="modelopt_fp4",
    num_hidden_layers=52,
    num_attention_heads=32,
    num_key_value_heads=2,
    head_dim=128,
    hidden_size=2688,
    intermediate_size=1856,
    vocab_size=131072,
    max_position_embeddings=262144,
    attention="hybrid",
    full_attention_layers=6,
    linear_layers=23,
    linear_kind="mamba2",
    linear_state_bytes=64 * 64 * 128 * 2,
    experts_total=128,
    experts_active=6,
    expert_fraction=0.85,
    params_total=31.6e9,
    params_active=3.5e9,
    num_shards=4,
    reasons=True,
    extra_config={**_NEMOTRON_3_LAYOUT, "n_routed_experts": 128, "n_shared_experts": 1},
)

_GPT_OSS_120B = ModelSpec(
    model_id="openai/gpt-oss-120b",
    sources="model_facts.tsv; bundled recipe gpt-oss-120b (weight_bytes 65283502899)",
    architecture="GptOssForCausalLM",
    model_type="gpt_oss",
    weight_bytes=65_283_502_899,
    quant_method="mxfp4",
    num_hidden_layers=36,
    num_attention_heads=64,
    num_key_value_heads=8,
    head_dim=64,
    hidden_size=2880,
    intermediate_size=2880,
    vocab_size=201088,
    max_position_embeddings=131072,
    attention="sliding_window",
    full_attention_layers=18,
    sliding_window_layers=18,
    sliding_window=128,
    experts_total=128,
    experts_active=4,
    expert_fraction=0.95,
    params_total=116.8e9,
    params_active=5.1e9,
    num_shards=15,
    reasons=True,
)

_GLM_45_AIR = ModelSpec(
    model_id="zai-org/GLM-4.5-Air",
    sources="model_facts.tsv (size derived: 106B x 2 bytes)",
    architecture="Glm4MoeForCausalLM",
    model_type="glm4_moe",
    weight_bytes=212_000_000_000,
    num_hidden_layers=46,
    num_attention_heads=96,
    num_key_value_heads=8,
    head_dim=128,
    hidden_size=4096,
    intermediate_size=10944,
    vocab_size=151552,
    max_position_embeddings=131072,
    attention="full",
    full_attention_layers=46,
    experts_total=128,
    experts_active=8,
    expert_fraction=0.9,
    params_total=106e9,
    params_active=12e9,
    mtp_layers=1,
    num_shards=47,
    reasons=True,
)


_MODELS: list[ModelSpec] = [
    ModelSpec(
        model_id="nvidia/GLM-5.3-Flash-FP4-Local",
        aliases=("nvidia/GLM-5.3-Flash-NVFP4", "z-ai/glm-5.3-flash"),
        simulated=True,
        sources="SIMULATED (no public config): see the module table",
        architecture="GlmMoeDsaForCausalLM",
        model_type="glm_moe_dsa",
        weight_bytes=_gib(114.6),
        replicated_bytes=_gib(1.6),
        quant_method="modelopt_mixed",
        num_hidden_layers=45,
        num_attention_heads=64,
        num_key_value_heads=64,
        head_dim=256,
        hidden_size=6144,
        intermediate_size=12288,
        vocab_size=154880,
        max_position_embeddings=524288,
        attention="mla",
        full_attention_layers=45,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        experts_total=256,
        experts_active=8,
        expert_fraction=0.95,
        params_total=219e9,
        params_active=14e9,
        mtp_layers=1,
        num_shards=24,
        activation_bytes_per_token=3_360_000,
        reasons=True,
        extra_config={
            "q_lora_rank": 2048,
            "qk_nope_head_dim": 192,
            "v_head_dim": 256,
            "n_shared_experts": 1,
            "moe_intermediate_size": 2048,
            "first_k_dense_replace": 1,
            "index_topk": 2048,
        },
    ),
    ModelSpec(
        model_id="nvidia/Qwen3.8-Flash-Next-FP4-Local",
        aliases=("nvidia/Qwen3.8-Flash-Next-NVFP4", "qwen/qwen3.8-flash-next"),
        simulated=True,
        sources="checkpoint 123.57 GiB and PLE 47.7 GiB real (model_facts.tsv); layout SIMULATED",
        architecture="Qwen4ExpForConditionalGeneration",
        model_type="qwen4_exp",
        weight_bytes=_gib(123.57),
        ple_bytes=_gib(47.7),
        replicated_bytes=_gib(2.69),
        quant_method="modelopt_mixed",
        num_hidden_layers=40,
        num_attention_heads=32,
        num_key_value_heads=2,
        head_dim=256,
        hidden_size=4096,
        intermediate_size=12288,
        vocab_size=248320,
        max_position_embeddings=262144,
        attention="hybrid",
        full_attention_layers=20,
        linear_layers=20,
        linear_kind="gated_deltanet",
        linear_state_bytes=32 * 128 * 128 * 2,
        experts_total=512,
        experts_active=10,
        expert_fraction=0.8,
        params_total=120e9,
        params_active=8e9,
        mtp_layers=1,
        num_shards=11,
        reasons=True,
        extra_config={
            "full_attention_interval": 2,
            "linear_num_value_heads": 32,
            "linear_num_key_heads": 16,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "moe_intermediate_size": 640,
            "shared_expert_intermediate_size": 640,
        },
    ),
    _NEMOTRON_3_NANO,
    replace(
        _NEMOTRON_3_NANO,
        model_id="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        aliases=(),
        sources="model_facts.tsv (BF16 release); size derived: 31.6B params x 2 bytes",
        weight_bytes=63_200_000_000,
        quant_method=None,
        num_shards=13,
        extra_config=_NEMOTRON_3_LAYOUT,
    ),
    _GPT_OSS_120B,
    replace(
        _GPT_OSS_120B,
        model_id="openai/gpt-oss-20b",
        sources="model_facts.tsv (12.8 GiB checkpoint)",
        weight_bytes=_gib(12.8),
        num_hidden_layers=24,
        full_attention_layers=12,
        sliding_window_layers=12,
        experts_total=32,
        expert_fraction=0.9,
        params_total=20.9e9,
        params_active=3.6e9,
        num_shards=3,
    ),
    ModelSpec(
        model_id="nvidia/Qwen3.6-35B-A3B-NVFP4",
        aliases=("Qwen/Qwen3.6-35B-A3B",),
        sources="architecture: bundled recipe (model card); weights SIMULATED (21.75 GiB)",
        architecture="Qwen3_5MoeForConditionalGeneration",
        model_type="qwen3_5_moe",
        weight_bytes=_gib(21.75),
        quant_method="modelopt_fp4",
        num_hidden_layers=40,
        num_attention_heads=16,
        num_key_value_heads=2,
        head_dim=256,
        hidden_size=2048,
        intermediate_size=6144,
        vocab_size=248320,
        max_position_embeddings=262144,
        attention="hybrid",
        full_attention_layers=10,
        linear_layers=30,
        linear_kind="gated_deltanet",
        linear_state_bytes=32 * 128 * 128 * 2,
        experts_total=256,
        experts_active=8,
        expert_fraction=0.9,
        params_total=35e9,
        params_active=3e9,
        mtp_layers=1,
        num_shards=5,
        reasons=True,
        extra_config={
            "full_attention_interval": 4,
            "linear_num_value_heads": 32,
            "linear_num_key_heads": 16,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "moe_intermediate_size": 512,
        },
    ),
    ModelSpec(
        model_id="z-lab/Qwen3.6-35B-A3B-DFlash",
        sources="vllm_startup_gb10_qwen36_dflash_specdec.log (0.88 GiB drafter)",
        architecture="DFlashDraftModel",
        model_type="dflash",
        weight_bytes=_gib(0.88),
        num_hidden_layers=5,
        num_attention_heads=16,
        num_key_value_heads=2,
        head_dim=256,
        hidden_size=2048,
        vocab_size=248320,
        max_position_embeddings=262144,
        attention="full",
        full_attention_layers=5,
        params_total=0.45e9,
        params_active=0.45e9,
        draft_only=True,
    ),
    ModelSpec(
        model_id="meta-llama/Llama-3.3-70B-Instruct",
        sources="model_facts.tsv; bundled recipe llama-3.3-70b-instruct-tp2",
        architecture="LlamaForCausalLM",
        model_type="llama",
        weight_bytes=141_125_877_760,
        replicated_bytes=0,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        hidden_size=8192,
        intermediate_size=28672,
        vocab_size=128256,
        max_position_embeddings=131072,
        attention="full",
        full_attention_layers=80,
        params_total=70.56e9,
        params_active=70.56e9,
        num_shards=30,
        gated=True,
    ),
    ModelSpec(
        model_id="Qwen/Qwen3-30B-A3B",
        sources="model_facts.tsv (size derived: 30.53B x 2 bytes)",
        architecture="Qwen3MoeForCausalLM",
        model_type="qwen3_moe",
        weight_bytes=61_060_000_000,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        hidden_size=2048,
        intermediate_size=6144,
        vocab_size=151936,
        max_position_embeddings=40960,
        attention="full",
        full_attention_layers=48,
        experts_total=128,
        experts_active=8,
        expert_fraction=0.9,
        params_total=30.53e9,
        params_active=3.3e9,
        num_shards=16,
        reasons=True,
    ),
    _qwen3(
        "Qwen/Qwen3-32B",
        "model_facts.tsv (size derived: 32.8B x 2 bytes)",
        weight_bytes=65_500_000_000,
        layers=64,
        heads=64,
        kv_heads=8,
        hidden=5120,
        intermediate=25600,
        params=32.8e9,
        shards=17,
    ),
    _qwen3(
        "Qwen/Qwen3-8B",
        "model_facts.tsv (size derived: 8.19B x 2 bytes)",
        weight_bytes=16_380_000_000,
        layers=36,
        heads=32,
        kv_heads=8,
        hidden=4096,
        intermediate=12288,
        params=8.19e9,
        shards=5,
    ),
    _qwen3(
        "Qwen/Qwen3-1.7B",
        "derived from the public Qwen3-1.7B config (2.03B params x 2 bytes)",
        weight_bytes=4_060_000_000,
        layers=28,
        heads=16,
        kv_heads=8,
        hidden=2048,
        intermediate=6144,
        params=2.03e9,
        shards=2,
    ),
    _qwen3(
        "Qwen/Qwen3-0.6B",
        "derived from the public Qwen3-0.6B config (0.75B params x 2 bytes); vLLM's default",
        weight_bytes=1_500_000_000,
        layers=28,
        heads=16,
        kv_heads=8,
        hidden=1024,
        intermediate=3072,
        params=0.75e9,
        shards=1,
    ),
    _GLM_45_AIR,
    replace(
        _GLM_45_AIR,
        model_id="zai-org/GLM-4.5-Air-FP8",
        sources="model_facts.tsv (FP8 variant; size derived: 106B x 1 byte + BF16 parts)",
        weight_bytes=110_000_000_000,
        quant_method="fp8",
        num_shards=24,
    ),
    ModelSpec(
        model_id="nvidia/NVIDIA-Nemotron-Nano-9B-v2-NVFP4",
        sources="model_facts.tsv (NVFP4 model_size 6GB)",
        architecture="NemotronHForCausalLM",
        model_type="nemotron_h",
        weight_bytes=6_000_000_000,
        quant_method="modelopt_fp4",
        num_hidden_layers=56,
        num_attention_heads=40,
        num_key_value_heads=8,
        head_dim=128,
        hidden_size=4480,
        intermediate_size=15680,
        vocab_size=131072,
        max_position_embeddings=131072,
        attention="hybrid",
        full_attention_layers=4,
        linear_layers=27,
        linear_kind="mamba2",
        linear_state_bytes=128 * 80 * 128 * 2,
        params_total=8.9e9,
        params_active=8.9e9,
        num_shards=2,
        reasons=True,
        extra_config={"mamba_num_heads": 128, "mamba_head_dim": 80, "ssm_state_size": 128},
    ),
]

CATALOGUE: dict[str, ModelSpec] = {m.model_id: m for m in _MODELS}

_INDEX: dict[str, ModelSpec] = {}
for _m in _MODELS:
    _INDEX[_m.model_id.lower()] = _m
    for _a in _m.aliases:
        _INDEX[_a.lower()] = _m

_CACHE_PATH = re.compile(r"models--([^/]+)--([^/]+)")


def canonical_id(model: str) -> str:
    """A model tag as written (repo id, HF cache snapshot path or local path), normalised to a
    repo id when it can be recognised: `.../models--org--name/snapshots/rev` -> `org/name`."""
    text = model.strip().rstrip("/")
    match = _CACHE_PATH.search(text)
    if match:
        return f"{match.group(1)}/{match.group(2)}"
    return text


def lookup(model: str) -> ModelSpec | None:
    """The catalogue entry for a model tag (repo id, alias or HF cache path), or None."""
    return _INDEX.get(canonical_id(model).lower())


def _known(model_id: str) -> ModelSpec:
    spec = lookup(model_id)
    if spec is None:
        raise KeyError(f"{model_id} is not in the simulated catalogue")
    return spec


def _layer_types(spec: ModelSpec) -> list[str]:
    n = spec.num_hidden_layers
    if spec.attention == "sliding_window":
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if spec.attention == "hybrid" and spec.linear_kind == "gated_deltanet":
        every = max(1, n // max(1, spec.full_attention_layers))
        return ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)]
    return ["full_attention"] * n


def hf_config(model_id: str) -> dict[str, Any]:
    """A `config.json` for the model, as a simulated node puts in its Hugging Face cache."""
    spec = _known(model_id)
    cfg: dict[str, Any] = {
        "architectures": [spec.architecture],
        "model_type": spec.model_type,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.head_dim,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "torch_dtype": spec.dtype,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": False,
        "transformers_version": "4.57.1",
    }
    if spec.attention == "mla":
        cfg["kv_lora_rank"] = spec.kv_lora_rank
        cfg["qk_rope_head_dim"] = spec.qk_rope_head_dim
    if spec.attention in ("sliding_window", "hybrid") and spec.linear_kind != "mamba2":
        cfg["layer_types"] = _layer_types(spec)
    if spec.sliding_window:
        cfg["sliding_window"] = spec.sliding_window
    if spec.is_moe:
        cfg["num_experts"] = spec.experts_total
        cfg["num_local_experts"] = spec.experts_total
        cfg["num_experts_per_tok"] = spec.experts_active
    if spec.mtp_layers:
        cfg["num_nextn_predict_layers"] = spec.mtp_layers
    if spec.quant_method:
        cfg["quantization_config"] = {"quant_method": spec.quant_method}
    if spec.ple_bytes:
        # SIMULATED key: the size of the per-layer-embedding (N-gram) table, which
        # VLLM_PLE_TABLE_MEMORY=disk keeps out of GPU memory.
        cfg["per_layer_embedding_table_bytes"] = spec.ple_bytes
    cfg.update(spec.extra_config)
    if spec.simulated:
        cfg["spark_tui_simulated"] = True
    return cfg


def _shard_name(i: int, n: int) -> str:
    if n == 1:
        return "model.safetensors"
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def _tensor_names(spec: ModelSpec) -> list[str]:
    names = ["model.embed_tokens.weight"]
    if spec.ple_bytes:
        names.append("model.per_layer_embed_tokens.weight")
    types = _layer_types(spec)
    for i in range(spec.num_hidden_layers + spec.mtp_layers):
        p = f"model.layers.{i}"
        names += [f"{p}.input_layernorm.weight", f"{p}.post_attention_layernorm.weight"]
        kind = types[i] if i < len(types) else "full_attention"
        if spec.attention == "mla":
            names += [
                f"{p}.self_attn.q_a_proj.weight",
                f"{p}.self_attn.q_b_proj.weight",
                f"{p}.self_attn.kv_a_proj_with_mqa.weight",
                f"{p}.self_attn.kv_b_proj.weight",
                f"{p}.self_attn.o_proj.weight",
            ]
        elif kind == "linear_attention":
            names += [f"{p}.linear_attn.in_proj_qkvz.weight", f"{p}.linear_attn.out_proj.weight"]
        else:
            names += [f"{p}.self_attn.{x}_proj.weight" for x in ("q", "k", "v", "o")]
        if spec.is_moe:
            names += [
                f"{p}.mlp.gate.weight",
                f"{p}.mlp.experts.gate_up_proj",
                f"{p}.mlp.experts.down_proj",
            ]
        else:
            names += [f"{p}.mlp.{x}_proj.weight" for x in ("gate", "up", "down")]
    names += ["model.norm.weight", "lm_head.weight"]
    return names


def safetensors_index(model_id: str) -> dict[str, Any]:
    """A `model.safetensors.index.json` for the model: metadata.total_size and a weight_map
    spreading the tensors over `num_shards` files in order."""
    spec = _known(model_id)
    names = _tensor_names(spec)
    n = spec.num_shards
    weight_map = {
        name: _shard_name(min(n - 1, i * n // len(names)), n) for i, name in enumerate(names)
    }
    return {"metadata": {"total_size": spec.weight_bytes}, "weight_map": weight_map}


def shard_files(model_id: str) -> list[tuple[str, int]]:
    """The checkpoint's shard files with their sizes (summing to the weight bytes)."""
    spec = _known(model_id)
    n = spec.num_shards
    base = spec.weight_bytes // n
    sizes = [base] * n
    sizes[-1] += spec.weight_bytes - base * n
    return [(_shard_name(i, n), sizes[i]) for i in range(n)]

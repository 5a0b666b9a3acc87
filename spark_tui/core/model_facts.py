"""Model facts for the fit check: from recipe metadata, from a model's config.json, merged."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from spark_tui.core.encoder_weights import encoder_bytes, unbacked_encoder_bytes
from spark_tui.core.errors import RecipeError
from spark_tui.core.facts import ModelFacts, NodeFacts
from spark_tui.core.recipe import Recipe
from spark_tui.core.serve_args import ServeArgs, human_readable_int

# NVFP4 as a KV cache dtype: 4-bit values plus one FP8 scale per 16 of them (4.5 bits).
NVFP4_KV_BYTES = 0.5625
# Bytes per parameter (or per KV element) of the dtypes configs and recipes name.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "fp8": 1,
    "float8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8": 1,
    "fp4": 0.5,
    "nvfp4": 0.5,
    "mxfp4": 0.5,
    "int4": 0.5,
    # Weight formats sparkrun's model_dtype names.
    "awq": 0.5,
    "awq4": 0.5,
    "awq8": 1,
    "w4a16_awq": 0.5,
    "gptq": 0.5,
}
# Dtypes a model computes in (config.json's torch_dtype); any other weight dtype is a
# quantization of the checkpoint.
FLOAT_DTYPES = frozenset(
    {"float32", "fp32", "float", "bfloat16", "bf16", "float16", "fp16", "half"}
)

# sparkrun's metadata names for model facts, and the ModelFacts field each fills (sparkrun
# writes model_vram in GiB; model_dtype is the weights' dtype: a float dtype or a
# quantization). head_dim and quantization have the same name in both.
SPARKRUN_FACT_KEYS = {
    "model_params": "params",
    "num_layers": "num_hidden_layers",
    "num_kv_heads": "num_key_value_heads",
    "model_vram": "weight_bytes",
    "model_dtype": "dtype or quantization",
}
# sparkrun's model keys the fit check does not read, and why.
SPARKRUN_IGNORED_KEYS = {
    "kv_dtype": "the KV cache dtype is --kv-cache-dtype, else the model's dtype, as vLLM takes it",
    "kv_vram_per_token": "the KV cache is sized from the layers, KV heads and head size",
    "quant_bits": "the quantization method gives the bytes per weight",
}

ATTENTION_KINDS = ("full", "sliding_window", "mla", "hybrid")
_ATTENTION_ALIASES = {
    "full": "full",
    "gqa": "full",
    "mha": "full",
    "mqa": "full",
    "sliding_window": "sliding_window",
    "sliding": "sliding_window",
    "swa": "sliding_window",
    "mla": "mla",
    "hybrid": "hybrid",
    "linear": "hybrid",
    "mamba": "hybrid",
}

_INT_FIELDS = (
    "weight_bytes",
    "params",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_size",
    "max_position_embeddings",
    "sliding_window",
    "full_attention_layers",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "global_head_dim",
    "num_global_key_value_heads",
    "linear_layers",
    "linear_state_bytes",
    "mtp_layers",
    "ple_table_bytes",
    "encoder_bytes",
    "unbacked_encoder_bytes",
    "vocab_size",
    "num_experts",
)
_FACT_FIELDS = tuple(f.name for f in fields(ModelFacts) if f.name not in ("model_id", "sources"))

_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]i?[bB]|[bB])\s*")
_COUNT_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMBT])\s*")
_COUNT_UNITS = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def dtype_bytes(name: str | None) -> float | None:
    """Bytes per element of a dtype name ("bfloat16", "torch.float16", "fp8_e4m3"), or None."""
    if not name:
        return None
    key = str(name).lower().removeprefix("torch.")
    return DTYPE_BYTES.get(key)


def _to_int(key: str, value: Any, where: str) -> int | None:
    """A fact as an int: ints, integral floats, numeric strings, sizes ("48 GiB", "3G")."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, float) and key in ("weight_bytes", "params", "ple_table_bytes"):
        return int(value)
    if isinstance(value, str):
        text = value.strip().replace("_", "").replace(",", "")
        m = _SIZE_RE.fullmatch(text)
        if m and key.endswith("_bytes"):
            return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])
        m = _COUNT_RE.fullmatch(text)
        if m and key == "params":
            return int(float(m.group(1)) * _COUNT_UNITS[m.group(2)])
        try:
            return human_readable_int(text)
        except ValueError:
            pass
    raise RecipeError(
        f"{where}: {key}={value!r} is not a whole number",
        f"write {key} as an integer (sizes in bytes, or like 48GiB / 3G)",
    )


def normalise_attention(value: Any, where: str = "metadata") -> str | None:
    """One of ATTENTION_KINDS from a recipe's `attention:` spelling, or None when absent."""
    if value is None:
        return None
    kind = _ATTENTION_ALIASES.get(str(value).strip().lower().replace("-", "_"))
    if kind is None:
        raise RecipeError(
            f"{where}: attention={value!r} is not a known attention kind",
            "use one of: " + ", ".join(ATTENTION_KINDS),
        )
    return kind


def _with_derived_weights(facts: ModelFacts) -> ModelFacts:
    """Fill weight_bytes from params x dtype bytes when only those are known."""
    if facts.weight_bytes is not None or facts.params is None:
        return facts
    per = dtype_bytes(facts.quantization) or dtype_bytes(facts.dtype)
    if per is None:
        return facts
    sources = dict(facts.sources)
    sources["weight_bytes"] = (
        f"derived: params x {per:g} bytes ({facts.quantization or facts.dtype})"
    )
    return replace(facts, weight_bytes=int(facts.params * per), sources=sources)


def _sparkrun_label(key: str) -> str:
    return f"recipe metadata (sparkrun's {key})"


def _param_count(value: Any, where: str) -> int | None:
    """sparkrun's model_params: 7000000000, 7.0e9, "7B", "0.5b", "480M", "7_000_000_000"."""
    if isinstance(value, str):
        text = value.strip().replace("_", "").upper()
        m = _COUNT_RE.fullmatch(text)
        if m:
            return round(float(m.group(1)) * _COUNT_UNITS[m.group(2)])
        try:
            value = float(text)
        except ValueError:
            value = text
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return int(value)
    raise RecipeError(
        f"{where}: model_params={value!r} is not a parameter count",
        "write model_params as a count such as 7000000000, 7B or 480M",
    )


def _sparkrun_facts(meta: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The facts sparkrun's metadata names give (see SPARKRUN_FACT_KEYS), with their sources."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def put(field_name: str, value: Any, key: str) -> None:
        values[field_name] = value
        sources[field_name] = _sparkrun_label(key)

    if meta.get("model_params") is not None:
        put("params", _param_count(meta["model_params"], where), "model_params")
    for key in ("num_layers", "num_kv_heads"):
        if meta.get(key) is not None:
            field_name = SPARKRUN_FACT_KEYS[key]
            put(field_name, _to_int(field_name, meta[key], where), key)
    vram = meta.get("model_vram")
    if vram is not None:
        try:
            gib = float(vram) if not isinstance(vram, bool) else math.nan
        except (TypeError, ValueError):
            gib = math.nan
        if not math.isfinite(gib) or gib < 0:
            raise RecipeError(
                f"{where}: model_vram={vram!r} is not a number of GiB",
                "write model_vram as the weights' size in GiB (e.g. 25.3), as sparkrun does",
            )
        put("weight_bytes", int(gib * 2**30), "model_vram, GiB")
    dtype = meta.get("model_dtype")
    if dtype is not None:
        name = str(dtype).strip().lower().replace("-", "_").removeprefix("torch.")
        if dtype_bytes(name) is None:
            raise RecipeError(
                f"{where}: model_dtype={dtype!r} is not a dtype this tool knows",
                "use one of: " + ", ".join(sorted(DTYPE_BYTES)),
            )
        name = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(name, name)
        put("dtype" if name in FLOAT_DTYPES else "quantization", name, "model_dtype")
    return values, sources


def ignored_metadata(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """sparkrun's model keys a recipe's metadata carries that the fit check does not read,
    each with the reason."""
    meta = metadata or {}
    return {k: why for k, why in SPARKRUN_IGNORED_KEYS.items() if meta.get(k) is not None}


def facts_from_metadata(model_id: str, metadata: Mapping[str, Any] | None) -> ModelFacts:
    """ModelFacts from a recipe's `metadata:` (keys named as the ModelFacts fields).

    `metadata.facts_sources` (a mapping fact -> where it came from) labels each fact;
    `metadata.config` may hold a whole config.json, used for what the keys leave out.
    """
    meta = dict(metadata or {})
    where = f"recipe metadata ({model_id})"
    cited = meta.get("facts_sources")
    cited_map: Mapping[str, Any] = cited if isinstance(cited, Mapping) else {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in _FACT_FIELDS:
        if meta.get(key) is None:
            continue
        raw = meta[key]
        if key in _INT_FIELDS:
            values[key] = _to_int(key, raw, where)
        elif key == "attention":
            values[key] = normalise_attention(raw, where)
        else:
            values[key] = str(raw)
        label = cited_map.get(key)
        sources[key] = f"recipe metadata: {label}" if label else "recipe metadata"
    # sparkrun's names fill what spark-tui's own names leave out.
    sparkrun_values, sparkrun_sources = _sparkrun_facts(meta, where)
    for key, value in sparkrun_values.items():
        if key not in values:
            values[key] = value
            sources[key] = sparkrun_sources[key]
    facts = ModelFacts(model_id=model_id, sources=sources, **values)
    config = meta.get("config")
    if isinstance(config, Mapping):
        from_config = facts_from_hf_config(
            model_id, dict(config), None, source="recipe metadata config"
        )
        facts = merge_facts(facts, from_config)
    # Config-style keys written straight into the metadata (hybrid_override_pattern,
    # layer_types, mamba_* ...) say what the named keys leave out.
    loose = {k: v for k, v in meta.items() if k not in ("config", "facts_sources")}
    from_keys = facts_from_hf_config(model_id, loose, None, source="recipe metadata")
    # Metadata is not a whole config: absent keys say nothing, so no config defaults
    # (full attention, one KV head per head) are read into it.
    drop: dict[str, Any] = {}
    if from_keys.attention == "full" or (
        facts.attention is not None and from_keys.attention != facts.attention
    ):
        drop["attention"] = None
    if "one KV head per head" in from_keys.sources.get("num_key_value_heads", ""):
        drop["num_key_value_heads"] = None
    facts = merge_facts(facts, replace(from_keys, **drop))
    return _with_derived_weights(facts)


def _text_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The language model's config: multimodal configs nest it under text_config & co."""
    merged = dict(config)
    for key in ("text_config", "llm_config", "language_config", "thinker_config"):
        inner = config.get(key)
        if isinstance(inner, Mapping):
            if key == "thinker_config" and isinstance(inner.get("text_config"), Mapping):
                inner = inner["text_config"]
            merged.update(inner)
            break
    return merged


def _first(cfg: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    return None


def _max_position(cfg: Mapping[str, Any]) -> int | None:
    """vLLM's derived max length: max_position_embeddings, stretched by rope scaling."""
    base = _positive_int(
        _first(cfg, "max_position_embeddings", "max_sequence_length", "seq_length", "n_positions")
    )
    rope = cfg.get("rope_scaling")
    if not isinstance(rope, Mapping):
        rope = cfg.get("rope_parameters")
    if base is None or not isinstance(rope, Mapping):
        return base
    kind = rope.get("rope_type") or rope.get("type")
    factor = rope.get("factor")
    # vLLM leaves these as they are: the position limit already describes them.
    if kind in (None, "default", "su", "longrope", "llama3", "mrope", "proportional"):
        return base
    if not isinstance(factor, int | float) or factor <= 1:
        return base
    if kind == "yarn":
        original = _positive_int(rope.get("original_max_position_embeddings"))
        return int((original or base) * factor)
    return int(base * factor)


def _layer_kinds(cfg: Mapping[str, Any], layers: int | None) -> dict[str, int] | None:
    """Counts of full / sliding / linear layers when the config spells a per-layer layout."""
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        counts = {"full": 0, "sliding": 0, "linear": 0}
        for t in types:
            name = str(t).lower()
            if "sliding" in name or "chunked" in name or name == "local":
                counts["sliding"] += 1
            elif "linear" in name or "mamba" in name or "ssm" in name:
                counts["linear"] += 1
            else:
                counts["full"] += 1
        return counts
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        # Nemotron-H: M = Mamba-2, * = attention, - = MLP, E = MoE (no cache).
        return {"full": pattern.count("*"), "sliding": 0, "linear": pattern.count("M")}
    block_types = cfg.get("layers_block_type")
    if isinstance(block_types, list) and block_types:
        names = [str(t).lower() for t in block_types]
        return {
            "full": sum(1 for n in names if "attention" in n),
            "sliding": 0,
            "linear": sum(1 for n in names if "mamba" in n or "linear" in n),
        }
    interval = _positive_int(cfg.get("full_attention_interval"))
    if interval and layers:
        # Qwen3-Next: every interval-th layer is full attention, the rest gated delta-net.
        full = layers // interval
        return {"full": full, "sliding": 0, "linear": layers - full}
    return None


def _sliding_counts(cfg: Mapping[str, Any], layers: int | None) -> dict[str, int] | None:
    """Full/sliding split of families that spell it without layer_types."""
    window = _positive_int(cfg.get("sliding_window"))
    if window is None or cfg.get("use_sliding_window") is False or not layers:
        return None
    model_type = str(cfg.get("model_type") or "")
    pattern = _positive_int(cfg.get("sliding_window_pattern"))
    if pattern and pattern > 1:
        full = layers // pattern  # every pattern-th layer is global (Gemma 3, Cohere2)
        return {"full": full, "sliding": layers - full, "linear": 0}
    if model_type.startswith("gemma2"):
        return {"full": layers // 2, "sliding": layers - layers // 2, "linear": 0}
    return {"full": 0, "sliding": layers, "linear": 0}


# transformers' config-class defaults, used when a config.json leaves the key out.
_DEFAULT_CONV_KERNEL = 4  # Qwen3NextConfig.linear_conv_kernel_dim, Mamba2/NemotronH conv_kernel
_DEFAULT_GROUPS = {"nemotron_h": 8}  # NemotronHConfig.n_groups (Mamba2Config: 1)


def _linear_state_bytes(cfg: Mapping[str, Any], elem: float) -> int | None:
    """Per-sequence state of one Mamba / linear-attention layer at TP=1 (conv + SSM state)."""
    nk = _positive_int(cfg.get("linear_num_key_heads"))
    nv = _positive_int(cfg.get("linear_num_value_heads"))
    dk = _positive_int(cfg.get("linear_key_head_dim"))
    dv = _positive_int(cfg.get("linear_value_head_dim"))
    if nk and nv and dk and dv:
        kernel = _positive_int(cfg.get("linear_conv_kernel_dim")) or _DEFAULT_CONV_KERNEL
        # Gated delta-net (Qwen3-Next): conv over q, k, v plus a dk x dv state per value head.
        conv = (2 * nk * dk + nv * dv) * (kernel - 1)
        ssm = nv * dk * dv
        ssm_elem = elem
        if str(cfg.get("model_type") or "").startswith("qwen3_5"):
            # vLLM keeps the recurrent state of Qwen3.5 / 3.6 in float32 (the conv state in
            # the model's dtype). The Qwen3.6 DFlash log shows it: vLLM grows the attention
            # block to hold one state, to 1168 tokens x 2048 B = 8192 channels x (3 + 15 draft)
            # conv rows x 2 B + 32 x 128 x 128 x 4 B.
            ssm_elem = max(elem, 4)
        return int(conv * elem + ssm * ssm_elem)
    heads = _positive_int(_first(cfg, "mamba_num_heads", "mamba_n_heads"))
    head_dim = _positive_int(_first(cfg, "mamba_head_dim", "mamba_d_head"))
    state = _positive_int(_first(cfg, "ssm_state_size", "mamba_d_state", "state_size"))
    kernel = _positive_int(_first(cfg, "conv_kernel", "mamba_d_conv")) or _DEFAULT_CONV_KERNEL
    if heads and head_dim and state:
        groups = _positive_int(_first(cfg, "n_groups", "mamba_n_groups")) or _DEFAULT_GROUPS.get(
            str(cfg.get("model_type") or ""), 1
        )
        # Mamba-2: conv over x, B, C plus a head_dim x state matrix per head.
        inner = heads * head_dim
        conv = (inner + 2 * groups * state) * (kernel - 1)
        ssm = inner * state
        return int((conv + ssm) * elem)
    hidden = _positive_int(cfg.get("hidden_size"))
    expand = _positive_int(_first(cfg, "mamba_expand", "expand"))
    if hidden and expand and state:
        # Mamba-1 (Jamba): conv and an inner x state SSM state.
        inner = hidden * expand
        return int((inner * (kernel - 1) + inner * state) * elem)
    return None


def facts_from_hf_config(
    model_id: str,
    config: Mapping[str, Any],
    weight_bytes: int | None,
    source: str = "config.json",
) -> ModelFacts:
    """ModelFacts from a Hugging Face config.json (llama/qwen, gpt-oss, gemma, MLA, hybrid).

    Only what the config states (or what follows from it as vLLM reads it) is filled;
    everything else stays None so the fit check can name it.
    """
    cfg = _text_config(config)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def put(key: str, value: Any, note: str = "") -> None:
        if value is None:
            return
        values[key] = value
        sources[key] = source + (f" ({note})" if note else "")

    layers = _positive_int(_first(cfg, "num_hidden_layers", "n_layer", "num_layers", "n_layers"))
    heads = _positive_int(_first(cfg, "num_attention_heads", "n_head", "num_heads"))
    hidden = _positive_int(_first(cfg, "hidden_size", "d_model", "n_embd"))
    put("num_hidden_layers", layers)
    put("num_attention_heads", heads)
    put("hidden_size", hidden)
    put("vocab_size", _positive_int(_first(cfg, "vocab_size", "padded_vocab_size")))
    # A dense model's config names no experts: 0 only where this is a whole config.json
    # (recipe metadata keys that leave the count out say nothing about it).
    whole = bool(config.get("model_type") or config.get("architectures"))
    put("num_experts", _num_experts(cfg, whole), "expert count, as vLLM reads it")
    put("weight_bytes", _positive_int(weight_bytes), "weight size")
    dtype = _first(cfg, "torch_dtype", "dtype") or _first(config, "torch_dtype", "dtype")
    put("dtype", str(dtype).removeprefix("torch.") if dtype else None)
    quant = config.get("quantization_config") or cfg.get("quantization_config")
    if isinstance(quant, Mapping):
        put("quantization", _first(quant, "quant_method", "quant_algo", "format"))
    put("max_position_embeddings", _max_position(cfg))

    kv_lora = _positive_int(cfg.get("kv_lora_rank"))
    rope_dim = _positive_int(cfg.get("qk_rope_head_dim"))
    kinds = _layer_kinds(cfg, layers)
    if kinds is None and kv_lora is None:
        kinds = _sliding_counts(cfg, layers)
    if kv_lora is not None:
        put("attention", "mla", "kv_lora_rank")
        put("kv_lora_rank", kv_lora)
        put("qk_rope_head_dim", rope_dim)
    elif kinds and kinds["linear"]:
        put("attention", "hybrid", "linear/Mamba layers")
        put("full_attention_layers", kinds["full"] + kinds["sliding"])
        put("linear_layers", kinds["linear"])
    elif kinds and kinds["sliding"]:
        put("attention", "sliding_window", "sliding layers")
        put("full_attention_layers", kinds["full"])
        put("sliding_window", _positive_int(_first(cfg, "sliding_window", "attention_chunk_size")))
    elif layers is not None:
        put("attention", "full")
    if kinds and kinds["sliding"] and "sliding_window" not in values:
        put("sliding_window", _positive_int(cfg.get("sliding_window")))

    if kv_lora is None:
        kv_heads = _positive_int(
            _first(cfg, "num_key_value_heads", "num_kv_heads", "multi_query_group_num", "n_head_kv")
        )
        if kv_heads is None and heads is not None and cfg.get("multi_query") is not True:
            put("num_key_value_heads", heads, "no num_key_value_heads: one KV head per head")
        else:
            put("num_key_value_heads", kv_heads)
        head_dim = _positive_int(_first(cfg, "head_dim", "kv_channels", "attention_head_dim"))
        if head_dim is None and hidden and heads:
            put("head_dim", hidden // heads, "hidden_size / num_attention_heads")
        else:
            put("head_dim", head_dim)
        put("global_head_dim", _positive_int(cfg.get("global_head_dim")))
        put("num_global_key_value_heads", _positive_int(cfg.get("num_global_key_value_heads")))

    if values.get("attention") == "hybrid":
        elem = dtype_bytes(values.get("dtype")) or 2
        put("linear_state_bytes", _linear_state_bytes(cfg, elem), "conv + SSM state")
    # Not a transformers key: the simulated catalogue's name for the PLE (N-gram) table size.
    put(
        "ple_table_bytes",
        _positive_int(_first(cfg, "ple_table_bytes", "per_layer_embedding_table_bytes")),
    )
    put(
        "mtp_layers",
        _positive_int(_first(cfg, "num_nextn_predict_layers", "mtp_num_hidden_layers")),
    )
    # The encoders' weights keep the checkpoint's dtype (quantisation spares them).
    elem = dtype_bytes(values.get("dtype")) or 2
    put("encoder_bytes", encoder_bytes(config, hidden, elem), "vision_config")
    return ModelFacts(model_id=model_id, sources=sources, **values)


def _num_experts(cfg: Mapping[str, Any], whole: bool) -> int | None:
    """The routed-expert count by vLLM 0.32's names (0 for a whole config naming none)."""
    value = _first(cfg, "num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")
    if isinstance(value, list):
        value = value[0] if value else None
    count = _positive_int(value)
    if count is None:
        blocks = cfg.get("block_configs")
        if isinstance(blocks, list):
            count = max(
                (
                    _positive_int(b.get("n_routed_experts")) or 0
                    for b in blocks
                    if isinstance(b, Mapping) and b.get("block_type") == "moe"
                ),
                default=0,
            )
    if count is None and whole:
        return 0
    return count


def merge_facts(primary: ModelFacts, fallback: ModelFacts) -> ModelFacts:
    """primary's facts, with the ones it lacks taken from fallback (sources kept per fact)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in _FACT_FIELDS:
        mine = getattr(primary, key)
        if mine is not None:
            values[key] = mine
            if key in primary.sources:
                sources[key] = primary.sources[key]
        elif getattr(fallback, key) is not None:
            values[key] = getattr(fallback, key)
            if key in fallback.sources:
                sources[key] = fallback.sources[key]
    return ModelFacts(model_id=primary.model_id, sources=sources, **values)


def _same_model(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


def facts_from_nodes(
    model_id: str, nodes: Iterable[NodeFacts], revision: str | None = None
) -> ModelFacts | None:
    """What the nodes' `models` entries for model_id (config, weight_bytes) say, or None."""
    found: ModelFacts | None = None
    for node in nodes:
        for entry in node.models:
            if not _same_model(entry.repo_id, model_id):
                continue
            if revision and entry.revision and entry.revision != revision:
                continue
            if entry.config is None and entry.weight_bytes is None:
                continue
            # A facts file holds what a probe found there: the node's cache either way.
            at = f"@{entry.revision[:12]}" if entry.revision else ""
            label = f"{node.name}'s Hugging Face cache ({entry.repo_id}{at})"
            facts = facts_from_hf_config(
                model_id, entry.config or {}, entry.weight_bytes, source=label
            )
            if entry.config and entry.modules is not None:
                facts = with_checkpoint_modules(facts, entry.config, entry.modules, label)
            found = facts if found is None else merge_facts(found, facts)
    return found


def with_checkpoint_modules(
    facts: ModelFacts, config: Mapping[str, Any], modules: Collection[str], label: str
) -> ModelFacts:
    """`facts` with the encoders config.json describes counted as the checkpoint's tensors
    (`modules`, their names' first two parts) say: an audio tower it holds weighs in its
    weights, one it lacks is still built by vLLM (`unbacked_encoder_bytes`)."""
    extra: dict[str, Any] = {}
    sources = dict(facts.sources)
    elem = dtype_bytes(facts.dtype) or 2
    held = encoder_bytes(config, facts.hidden_size, elem, modules)
    if held is not None and held != facts.encoder_bytes:
        extra["encoder_bytes"] = held
        sources["encoder_bytes"] = f"{label} (config.json's encoders it holds)"
    unbacked = unbacked_encoder_bytes(config, facts.hidden_size, elem, modules)
    if unbacked is not None:
        extra["unbacked_encoder_bytes"] = unbacked
        sources["unbacked_encoder_bytes"] = (
            f"{label} (config.json's audio_config; the safetensors hold no audio tower)"
        )
    return replace(facts, sources=sources, **extra) if extra else facts


@dataclass(frozen=True)
class HubFacts:
    """What the Hugging Face Hub says of a model at one revision, already fetched and parsed.

    `revision` is the commit sha the recipe's `model_revision` (None: main) resolved to;
    `weight_bytes` the safetensors files' total size (vLLM's "Checkpoint size"), `dtype`
    the tensors' dominant dtype and `parameters` the parameter count per dtype, from the
    safetensors headers. `cached` says the facts came from the control machine's cache.
    """

    repo_id: str
    revision: str
    config: dict[str, Any]
    requested_revision: str | None = None
    weight_bytes: int | None = None
    dtype: str | None = None
    parameters: dict[str, int] = field(default_factory=dict)
    gated: bool = False
    cached: bool = False
    # The checkpoint's tensor names up to their second dot (`model.vision_tower`), from
    # the safetensors headers: which encoders it holds. None: not read.
    modules: tuple[str, ...] | None = None

    @property
    def label(self) -> str:
        """Where the facts came from, as the fit verdict names it."""
        at = self.revision[:12]
        if self.requested_revision and self.requested_revision != self.revision:
            at += f" ({self.requested_revision})"
        return f"Hugging Face Hub {self.repo_id}@{at}" + (", cached" if self.cached else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "revision": self.revision,
            "requested_revision": self.requested_revision,
            "config": self.config,
            "weight_bytes": self.weight_bytes,
            "dtype": self.dtype,
            "parameters": dict(self.parameters),
            "gated": self.gated,
            "modules": None if self.modules is None else list(self.modules),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, cached: bool = False) -> HubFacts:
        config = data.get("config")
        params = data.get("parameters")
        return cls(
            repo_id=str(data["repo_id"]),
            revision=str(data["revision"]),
            config=dict(config) if isinstance(config, Mapping) else {},
            requested_revision=data.get("requested_revision"),
            weight_bytes=_positive_int(data.get("weight_bytes")),
            dtype=data.get("dtype"),
            parameters=dict(params) if isinstance(params, Mapping) else {},
            gated=bool(data.get("gated")),
            cached=cached,
            modules=_modules(data.get("modules")),
        )


def _modules(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list | tuple):
        return None
    return tuple(sorted({str(m) for m in value}))


# safetensors dtype names, as the Hub's metadata spells them, to config.json's.
_SAFETENSORS_DTYPES = {
    "BF16": "bfloat16",
    "F16": "float16",
    "F32": "float32",
    "F8_E4M3": "fp8_e4m3",
    "F8_E5M2": "fp8_e5m2",
    "I8": "int8",
    "U8": "uint8",
}


def safetensors_dtype(name: str) -> str:
    """config.json's name for a safetensors dtype ("BF16" -> "bfloat16")."""
    return _SAFETENSORS_DTYPES.get(name.upper(), name.lower())


def facts_from_hub(model_id: str, hub: HubFacts) -> ModelFacts:
    """ModelFacts from the Hub's config.json and safetensors metadata at hub.revision."""
    facts = facts_from_hf_config(model_id, hub.config, None, source=f"{hub.label} config.json")
    extra: dict[str, Any] = {}
    sources = dict(facts.sources)
    if hub.weight_bytes is not None:
        extra["weight_bytes"] = hub.weight_bytes
        sources["weight_bytes"] = f"{hub.label} (safetensors file sizes)"
    if facts.dtype is None and hub.dtype:
        extra["dtype"] = hub.dtype
        sources["dtype"] = f"{hub.label} (safetensors headers)"
    if facts.params is None and hub.parameters:
        extra["params"] = sum(hub.parameters.values())
        sources["params"] = f"{hub.label} (safetensors headers)"
    facts = replace(facts, sources=sources, **extra)
    if hub.modules is not None:
        # Which encoders the checkpoint holds decides what an audio_config adds.
        facts = with_checkpoint_modules(facts, hub.config, hub.modules, hub.label)
    return facts


def needs_hub(recipe: Recipe, facts: ModelFacts, settings: ServeArgs | None = None) -> bool:
    """Whether the fit check lacks a model fact the Hub could give (a repo id, not a path)."""
    model = recipe.model.strip()
    if not model or model.startswith(("/", ".", "~")) or model.count("/") != 1:
        return False
    return bool(missing_for_fit(facts, settings))


def resolve_model_facts(
    recipe: Recipe, nodes: Iterable[NodeFacts], hub: HubFacts | None = None
) -> ModelFacts:
    """The recipe's metadata facts, completed by any node's `models` entry for its model,
    then by what the Hub said (`hub`, fetched by remote.hub) for what is still missing.

    Each fact keeps where it came from in `sources`: recipe metadata, a node's cache
    (named), or the Hub at a revision.
    """
    facts = facts_from_metadata(recipe.model, recipe.metadata)
    from_nodes = facts_from_nodes(recipe.model, nodes, recipe.model_revision)
    if from_nodes is not None:
        facts = merge_facts(facts, from_nodes)
    if hub is not None:
        facts = merge_facts(facts, facts_from_hub(recipe.model, hub))
    return _with_derived_weights(facts)


def effective_head_dim(facts: ModelFacts) -> int | None:
    """head_dim, or hidden_size / num_attention_heads when only those are known."""
    if facts.head_dim is not None:
        return facts.head_dim
    if facts.hidden_size and facts.num_attention_heads:
        return facts.hidden_size // facts.num_attention_heads
    return None


def kv_cache_dtype_bytes(facts: ModelFacts, args: ServeArgs) -> float | None:
    """Bytes per KV element: `--kv-cache-dtype`, and for auto the model's dtype."""
    kv = (args.kv_cache_dtype or "auto").lower()
    if kv == "fp8_ds_mla":
        return 1
    if kv == "nvfp4":
        return NVFP4_KV_BYTES
    if kv != "auto":
        return dtype_bytes(kv)
    if args.dtype and args.dtype.lower() != "auto":
        return dtype_bytes(args.dtype)
    return dtype_bytes(facts.dtype)


def missing_for_fit(facts: ModelFacts, settings: ServeArgs | None = None) -> list[str]:
    """The facts the fit check needs and does not have, by ModelFacts field name."""
    missing: list[str] = []
    if facts.weight_bytes is None:
        missing.append("weight_bytes")
    for key in ("num_hidden_layers", "num_attention_heads", "attention"):
        if getattr(facts, key) is None:
            missing.append(key)
    kind = facts.attention
    if kind in (None, "full", "sliding_window", "hybrid"):
        if facts.num_key_value_heads is None:
            missing.append("num_key_value_heads")
        if effective_head_dim(facts) is None:
            missing.append("head_dim")
    if kind == "sliding_window":
        for key in ("sliding_window", "full_attention_layers"):
            if getattr(facts, key) is None:
                missing.append(key)
    if kind == "hybrid":
        for key in ("full_attention_layers", "linear_layers", "linear_state_bytes"):
            if getattr(facts, key) is None:
                missing.append(key)
    if kind == "mla":
        for key in ("kv_lora_rank", "qk_rope_head_dim"):
            if getattr(facts, key) is None:
                missing.append(key)
    if settings is None or settings.max_model_len is None:
        if facts.max_position_embeddings is None:
            missing.append("max_position_embeddings")
    kv_known = settings is not None and kv_cache_dtype_bytes(facts, settings) is not None
    if not kv_known and dtype_bytes(facts.dtype) is None:
        missing.append("dtype")
    return missing

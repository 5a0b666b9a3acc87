"""Generated recipes through check and plan: a bad one ends as a typed SparkError with a
message and a remedy, never as any other exception."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_tui.core.errors import SparkError
from spark_tui.core.facts import NodeFacts, parse_facts
from spark_tui.core.fit import check_fit
from spark_tui.core.model_facts import resolve_model_facts
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe_loader import parse_recipe
from spark_tui.core.render import render_argv, render_env

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "simulated_facts_glm53_2x128.json"
NODES: list[NodeFacts] = parse_facts(FACTS.read_text(encoding="utf-8"), source=str(FACTS))

# Numbers that have broken arithmetic or parsing somewhere: huge, tiny, negative, not finite.
_NASTY_FLOATS = st.sampled_from([1.0e308, -1.0e308, float("inf"), float("-inf"), float("nan")])
_NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, -1, 2, 3, 7, 64, 128, 4096, 131072, 2**31, 2**63, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    _NASTY_FLOATS,
)
_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "none", "-x", "${AWS_SECRET_ACCESS_KEY}", "1e999", "48 GiB", "{a"]),
)
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXT)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_SETTINGS = [
    "tensor_parallel",
    "pipeline_parallel",
    "data_parallel",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_cache_memory_bytes",
    "kv_cache_dtype",
    "tool_call_parser",
    "enable_auto_tool_choice",
    "port",
    "host",
    "speculative_config",
    "served_model_name",
    "master_port",
    "distributed_executor_backend",
]
_FACT_KEYS = [
    "weight_bytes",
    "params",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_size",
    "max_position_embeddings",
    "sliding_window",
    "attention",
    "kv_lora_rank",
    "full_attention_layers",
    "linear_layers",
    "linear_state_bytes",
    "dtype",
    "quantization",
]
_FLAGS = [
    "--tensor-parallel-size",
    "-tp",
    "--max-model-len",
    "--gpu-memory-utilization",
    "--kv-cache-memory-bytes",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "--api-key",
    "--served-model-name",
    "--speculative-config",
    "--data-parallel-size",
    "--port",
    "--nnodes",
    "--headless",
]


# What is done to a generated recipe: nothing (most), or one kind of damage.
_DAMAGE = ("none", "deep", "none", "huge_fact", "aliases", "none", "huge_default", "syntax")


@st.composite
def _command(draw: st.DrawFn, keys: list[str]) -> str:
    parts = ["vllm", "serve", "{model}"]
    for _ in range(draw(st.integers(0, 6))):
        parts.append(draw(st.sampled_from(_FLAGS)))
        choice = draw(st.integers(0, 3))
        if choice < 2 and keys:
            parts.append("{" + draw(st.sampled_from(keys)) + "}")
        elif choice == 1:
            value = draw(st.one_of(_NUMBERS, _TEXT))
            parts.append(yaml.safe_dump(value, default_flow_style=True).split("\n")[0] or "x")
    if draw(st.integers(0, 9)) == 9:
        return draw(st.sampled_from(["", "python -m x", "vllm serve", "vllm serve {nope}"]))
    return " ".join(parts)


_PLAUSIBLE = {
    "tensor_parallel": st.sampled_from([1, 2, 3]),
    "pipeline_parallel": st.sampled_from([1, 2]),
    "data_parallel": st.sampled_from([1, 2]),
    "gpu_memory_utilization": st.sampled_from([0.5, 0.85, 0.9, 1.0]),
    "max_model_len": st.sampled_from([4096, 131072, 1048576, "128k"]),
    "kv_cache_memory_bytes": st.sampled_from(["3G", 2**30, "1e3"]),
    "tool_call_parser": st.sampled_from(["hermes", "glm47", "none"]),
    "enable_auto_tool_choice": st.booleans(),
    "port": st.sampled_from([8000, 8001]),
    "kv_cache_dtype": st.sampled_from(["auto", "fp8"]),
    "speculative_config": st.sampled_from(['{"method": "mtp"}', {"num_speculative_tokens": 2}]),
    "served_model_name": st.sampled_from(["m", "${AWS_SECRET_ACCESS_KEY}"]),
}
_PLAUSIBLE_FACTS = {
    "weight_bytes": st.sampled_from([10 * 2**30, "48 GiB", 2**40]),
    "num_hidden_layers": st.sampled_from([24, 48, 61]),
    "num_attention_heads": st.sampled_from([32, 64, 96]),
    "num_key_value_heads": st.sampled_from([4, 8]),
    "head_dim": st.sampled_from([64, 128]),
    "max_position_embeddings": st.sampled_from([32768, 131072, 1048576]),
    "attention": st.sampled_from(["full", "mla", "sliding", "hybrid"]),
    "params": st.sampled_from([7 * 10**9, "120B"]),
    "hidden_size": st.sampled_from([4096, 8192]),
    "sliding_window": st.sampled_from([128, 4096]),
    "kv_lora_rank": st.sampled_from([512]),
    "full_attention_layers": st.sampled_from([0, 12]),
    "linear_layers": st.sampled_from([0, 36]),
    "linear_state_bytes": st.sampled_from([2**20]),
    "dtype": st.sampled_from(["bfloat16", "fp8"]),
    "quantization": st.sampled_from(["fp8", "nvfp4", "mxfp4"]),
}


def _mostly(draw: st.DrawFn, good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> Any:
    # Mostly plausible, so that most recipes get past loading and into check and plan.
    return draw(good) if draw(st.integers(0, 19)) < 18 else draw(bad)


@st.composite
def _recipe_text(draw: st.DrawFn) -> str:
    defaults: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(_SETTINGS), max_size=5, unique=True)):
        good = _PLAUSIBLE.get(key, st.sampled_from(["x", 1, 2]))
        defaults[key] = _mostly(draw, good, st.one_of(_SCALARS, _VALUES))
    doc: dict[str, Any] = {
        "recipe_version": _mostly(draw, st.sampled_from(["2", "1"]), st.sampled_from([2, "3"])),
        "model": _mostly(draw, st.just("org/model"), _SCALARS),
        "container": _mostly(draw, st.just("img:1"), _SCALARS),
        "defaults": defaults,
        "command": draw(_command(list(defaults))),
    }
    if draw(st.booleans()):
        meta: dict[str, Any] = {}
        for key in draw(st.lists(st.sampled_from(_FACT_KEYS), max_size=7, unique=True)):
            good = _PLAUSIBLE_FACTS.get(key, _TEXT)
            meta[key] = _mostly(draw, good, st.one_of(_NUMBERS, _TEXT))
        doc["metadata"] = meta
    if draw(st.booleans()):
        doc["env"] = draw(
            st.dictionaries(
                st.sampled_from(["A", "HF_TOKEN", "B-C", "VLLM_API_KEY"]),
                st.one_of(_TEXT, _SCALARS),
                max_size=3,
            )
        )
    for key in ("min_nodes", "max_nodes"):
        if draw(st.integers(0, 3)) == 0:
            doc[key] = _mostly(draw, st.sampled_from([1, 2]), _SCALARS)
    if draw(st.integers(0, 3)) == 0:
        doc[draw(st.sampled_from(["mods", "mode", "solo_only", "x"]))] = draw(_VALUES)
    damage = draw(st.sampled_from(_DAMAGE))
    if damage in ("huge_fact", "huge_default"):
        nasty = draw(st.one_of(_NASTY_FLOATS, st.sampled_from([10**400, -(10**30), 0, -1])))
        if damage == "huge_fact":
            meta = {k: draw(v) for k, v in _PLAUSIBLE_FACTS.items()}
            meta["attention"] = "full"
            meta[draw(st.sampled_from(sorted(_PLAUSIBLE_FACTS)))] = nasty
            doc["metadata"] = meta
        else:
            doc["defaults"][draw(st.sampled_from(_SETTINGS))] = nasty
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    # Structural damage a dump cannot produce: depth, aliases, broken syntax.
    if damage == "deep":
        depth = draw(st.sampled_from([50, 400, 3000]))
        text += "extra: " + "[" * depth + "]" * depth + "\n"
    elif damage == "aliases":
        text += "a: &a [x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 8)}]\n"
            for i in range(draw(st.integers(1, 7)))
        )
        if draw(st.booleans()):
            text = text.replace("model: org/model", f"model: *{chr(97 + 1)}")
    elif damage == "syntax":
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.sampled_from(['"', ":", "\t", "- ", "{", "&a *a"])) + text[cut:]
    return text


_SETS = st.lists(
    st.builds(
        lambda k, v: f"{k}={v}",
        st.sampled_from(_SETTINGS),
        st.sampled_from(["none", "0", "2", "1e308", "inf", "nan", "-1", "99999999999999999999"]),
    ),
    max_size=2,
)


def _evaluate(text: str, sets: list[str], n_nodes: int) -> None:
    recipe = parse_recipe(text, "fuzz", path="/recipes/fuzz.yaml")
    values = apply_overrides(recipe, sets)
    argv = render_argv(recipe, values)
    env = render_env(recipe)
    nodes = NODES[:n_nodes]
    facts = resolve_model_facts(recipe, nodes)
    try:
        check_fit(recipe, argv, env, nodes, facts, hf_token_set=False)
    finally:
        build_plan(recipe, values, nodes)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(text=_recipe_text(), sets=_SETS, n_nodes=st.integers(1, 2))
def test_generated_recipes_end_in_a_typed_error_or_a_result(
    text: str, sets: list[str], n_nodes: int
) -> None:
    try:
        _evaluate(text, sets, n_nodes)
    except SparkError as exc:
        assert exc.message.strip() and exc.remedy.strip()
        assert len(exc.message) <= 2000 and len(exc.remedy) <= 2000

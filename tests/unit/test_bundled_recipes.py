"""The bundled recipes: valid, complete metadata, and the playbook recipes exactly as the seed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from spark_tui.core import plan
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.recipe import Recipe
from spark_tui.core.recipe_loader import bundled_recipes_dir, find_recipe, list_recipes
from spark_tui.core.render import render_argv, render_env

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PLAYBOOK = (FIXTURES / "004_dfc9594d758c1f7f.txt").read_text()
SPARKRUN_PAGE = (FIXTURES / "003_e18b38501c6acedf.txt").read_text()

# The rank and rendezvous flags the launch plan sets on each rank.
RANK_FLAGS = (
    plan.NNODES,
    plan.NODE_RANK,
    plan.MASTER_ADDR,
    plan.MASTER_PORT,
    plan.HEADLESS,
    plan.DP_RANK,
    plan.DP_ADDRESS,
    plan.DP_RPC_PORT,
    plan.DP_START_RANK,
)

NAMES = sorted(p.stem for p in bundled_recipes_dir().glob("*.yaml"))
FACT_INTS = (
    "weight_bytes",
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
    "ple_table_bytes",
)
FACT_KEYS = (*FACT_INTS, "params", "dtype", "attention")


def seed_block(title: str) -> tuple[dict[str, str], list[str]]:
    """The exports and the `vllm serve` argv of one model section of the playbook."""
    section = PLAYBOOK[PLAYBOOK.index(title) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    text = block.group(1)
    exports = {}
    for line in text.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export ") :].partition("=")
            exports[name] = shlex.split(value)[0]
    serve = text[text.index("vllm serve") :]
    return exports, shlex.split(serve.replace("\\\n", " "))


def without_rank_flags(argv: list[str]) -> list[str]:
    """The seed's argv minus the rank/rendezvous flags the launch plan adds."""
    out: list[str] = []
    skip = 0
    for token in argv:
        if skip:
            skip -= 1
            continue
        if token in ("--nnodes", "--master-addr", "--master-port"):
            skip = 1
            continue
        if token == "${NODE_ARGS[@]}":
            continue
        out.append(token)
    return out


@pytest.mark.parametrize(
    ("name", "title", "model", "memory"),
    [
        (
            "glm-5.3-flash",
            "### GLM 5.3 Flash on two 128GB Sparks",
            "nvidia/GLM-5.3-Flash-FP4-Local",
            128,
        ),
        (
            "qwen3.8-flash-next",
            "### Qwen3.8 Flash-Next on two 64GB Sparks",
            "nvidia/Qwen3.8-Flash-Next-FP4-Local",
            64,
        ),
    ],
)
def test_playbook_recipes_match_the_seed(name: str, title: str, model: str, memory: int) -> None:
    exports, seed_argv = seed_block(title)
    recipe = find_recipe(name)
    assert recipe.source == "bundled"
    assert recipe.model == model
    assert recipe.container == "eugr/spark-vllm-b12x:nightly-20261015"
    assert (recipe.min_nodes, recipe.max_nodes) == (2, 2)
    assert recipe.runtime == "vllm-distributed"
    assert recipe.metadata["memory_gb_per_node"] == memory
    argv = render_argv(recipe, apply_overrides(recipe, []))
    assert seed_argv[:3] == ["vllm", "serve", model]
    assert argv == without_rank_flags(seed_argv)
    assert not any(t.split("=")[0] in RANK_FLAGS for t in argv)
    env = render_env(recipe)
    assert env == exports
    assert list(env) == list(exports)  # same order as the playbook's exports


def test_playbook_seed_parsing_sees_the_rank_flags() -> None:
    # guards the helper above: the seed really carries the flags we strip
    _, argv = seed_block("### GLM 5.3 Flash on two 128GB Sparks")
    assert argv[-7:] == [
        "--nnodes", "2", "--master-addr", "$HEAD_IP", "--master-port", "$MASTER_PORT",
        "${NODE_ARGS[@]}",
    ]  # fmt: skip
    assert len(without_rank_flags(argv)) == len(argv) - 7


def test_playbook_override_changes_only_that_flag() -> None:
    recipe = find_recipe("glm-5.3-flash")
    base = render_argv(recipe, apply_overrides(recipe, []))
    changed = render_argv(recipe, apply_overrides(recipe, ["max_num_seqs=8"]))
    assert len(base) == len(changed)
    assert [i for i, (a, b) in enumerate(zip(base, changed, strict=True)) if a != b] == [
        base.index("--max-num-seqs") + 1
    ]
    no_tools = render_argv(recipe, apply_overrides(recipe, ["tool_call_parser=none"]))
    assert "--tool-call-parser" not in no_tools and "glm47" not in no_tools
    # vLLM refuses --enable-auto-tool-choice without a parser: the pair goes together.
    assert "--enable-auto-tool-choice" in base and "--enable-auto-tool-choice" not in no_tools
    assert len(no_tools) == len(base) - 3


def test_nemotron_is_the_sparkrun_example_verbatim() -> None:
    example = SPARKRUN_PAGE[SPARKRUN_PAGE.index('recipe_version: "2"') :]
    example = example[: example.index("Multi-node with vllm-distributed")]
    seed = yaml.safe_load(example)
    ours = yaml.safe_load(
        (bundled_recipes_dir() / "nemotron-3-nano-30b-a3b-nvfp4.yaml").read_text()
    )
    meta = ours.pop("metadata")
    seed_meta = seed.pop("metadata")
    assert ours == seed
    assert meta["description"] == seed_meta["description"]
    recipe = find_recipe("nemotron-3-nano-30b-a3b-nvfp4")
    assert recipe.max_nodes == 1 and recipe.runtime == "vllm-distributed"


@pytest.mark.parametrize("name", NAMES)
def test_every_bundled_recipe_is_valid_and_carries_facts(name: str) -> None:
    recipe = find_recipe(name)
    argv = render_argv(recipe, apply_overrides(recipe, []))
    assert argv[:3] == ["vllm", "serve", recipe.model]
    assert recipe.container
    assert recipe.description
    meta = recipe.metadata
    assert meta["memory_gb_per_node"] in (64, 128)
    for key in FACT_INTS:
        if key in meta:
            assert isinstance(meta[key], int) and not isinstance(meta[key], bool), key
            assert meta[key] > 0, key
    if "attention" in meta:
        assert meta["attention"] in ("full", "sliding_window", "mla", "hybrid")
        if meta["attention"] in ("sliding_window", "hybrid"):
            assert "full_attention_layers" in meta
        if meta["attention"] == "mla":
            assert "kv_lora_rank" in meta and "qk_rope_head_dim" in meta
    sources = meta["facts_sources"]
    assert isinstance(sources, dict)
    for key in FACT_KEYS:
        if key in meta:
            assert sources.get(key), f"{name}: no source for {key}"
    # every fit fact is either present or declared missing: never silently absent
    missing = set(meta.get("facts_missing", []))
    required = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                "attention", "max_position_embeddings"}  # fmt: skip
    for key in required:
        assert (key in meta) != (key in missing), f"{name}: {key}"
    has_weights = "weight_bytes" in meta or ("params" in meta and "dtype" in meta)
    assert has_weights != ("weight_bytes" in missing), name


def test_at_least_six_bundled_recipes_with_the_expected_shapes() -> None:
    recipes: dict[str, Recipe] = {r.name: r for r in list_recipes()}
    assert len(recipes) >= 6
    assert recipes["gpt-oss-120b"].max_nodes == 1
    assert recipes["llama-3.3-70b-instruct-tp2"].defaults["tensor_parallel"] == 2
    assert recipes["llama-3.3-70b-instruct-tp2"].metadata["gated"] is True
    agent = render_argv(recipes["qwen3.6-35b-a3b-nvfp4"], recipes["qwen3.6-35b-a3b-nvfp4"].defaults)
    assert "--enable-prefix-caching" in agent
    assert agent[agent.index("--tool-call-parser") + 1] == "qwen3_xml"
    assert '"method":"mtp"' in agent[agent.index("--speculative-config") + 1]
    assert "--reasoning-parser" in agent

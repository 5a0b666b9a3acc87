"""Recipes as sparkrun's registries write them (eugr's v1 files, its mods, its metadata),
read from files this test writes: rendered, checked and planned as sparkrun runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tui.core.errors import OverrideError, RecipeError
from spark_tui.core.facts import GIB, NodeFacts, parse_facts
from spark_tui.core.fit import FitReport, check_fit
from spark_tui.core.kv_cache import layout_for
from spark_tui.core.model_facts import resolve_model_facts
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import Recipe
from spark_tui.core.recipe_loader import load_recipe_file
from spark_tui.core.render import render_argv, render_env
from spark_tui.core.serve_args import parse_serve_args
from spark_tui.core.serve_flags import parse_help

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "simulated_facts_glm53_2x128.json"
NODES: list[NodeFacts] = parse_facts(FACTS.read_text(encoding="utf-8"), source=str(FACTS))

# eugr's MTP recipes: a v1 command whose JSON braces are doubled for str.format.
V1_MTP = """\
recipe_version: "1"
name: qwen3.5-mtp
model: Qwen/Qwen3.5-122B-A10B-FP8
container: vllm-node
defaults:
  port: 8000
  host: 0.0.0.0
  tensor_parallel: 2
  gpu_memory_utilization: 0.85
  num_speculative_tokens: 3
command: |
  vllm serve {model} --host {host} --port {port} \\
    -tp {tensor_parallel} \\
    --gpu-memory-utilization {gpu_memory_utilization} \\
    --speculative-config '{{"method":"mtp","num_speculative_tokens":{num_speculative_tokens}}}'
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_escaped_braces_render_as_str_format_does(tmp_path: Path) -> None:
    recipe = load_recipe_file(write(tmp_path, "qwen3.5-mtp", V1_MTP))
    argv = render_argv(recipe, apply_overrides(recipe, []))
    spec = argv[argv.index("--speculative-config") + 1]
    assert json.loads(spec) == {"method": "mtp", "num_speculative_tokens": 3}
    # The same text through Python's own str.format, as sparkrun renders it.
    template = V1_MTP.split("--speculative-config ", 1)[1].strip().strip("'")
    assert spec == template.format(num_speculative_tokens=3)
    argv = render_argv(recipe, apply_overrides(recipe, ["num_speculative_tokens=5"]))
    assert json.loads(argv[argv.index("--speculative-config") + 1])["num_speculative_tokens"] == 5
    plan = build_plan(recipe, apply_overrides(recipe, []), NODES)
    assert spec in plan.ranks[0].argv


def test_a_lone_brace_in_an_escaped_template_is_a_recipe_error(tmp_path: Path) -> None:
    text = V1_MTP.replace('\'{{"method"', '\'{"method"')
    recipe = load_recipe_file(write(tmp_path, "broken", text))
    with pytest.raises(RecipeError) as exc:
        render_argv(recipe, apply_overrides(recipe, []))
    assert "{{" in exc.value.remedy


# eugr's recipes that load the gpu-mem-util-gb mod feed their gpu_memory_utilization (GiB
# there) to the flag the mod adds to vLLM.
GIB_RECIPE = """\
recipe_version: "1"
model: Org/Dense-70B
container: vllm-node
mods:
  - mods/gpu-mem-util-gb
metadata:
  weight_bytes: 40 GiB
  num_hidden_layers: 80
  num_attention_heads: 64
  num_key_value_heads: 8
  head_dim: 128
  attention: full
  max_position_embeddings: 131072
  dtype: bfloat16
defaults:
  port: 8000
  gpu_memory_utilization: 108
  max_model_len: 32768
command: |
  vllm serve {model} --port {port} \\
    --max-model-len {max_model_len} \\
    --gpu-memory-utilization-gb {gpu_memory_utilization}
"""


def gib_recipe(tmp_path: Path) -> Path:
    mod = tmp_path / "mods" / "gpu-mem-util-gb"
    mod.mkdir(parents=True)
    (mod / "run.sh").write_text("#!/bin/sh\necho patched\n")
    return write(tmp_path, "dense-70b-gb", GIB_RECIPE)


def check(recipe: Recipe, sets: list[str]) -> FitReport:
    settings = apply_overrides(recipe, sets)
    argv = render_argv(recipe, settings)
    facts = resolve_model_facts(recipe, NODES)
    return check_fit(recipe, argv, render_env(recipe), NODES[:1], facts, hf_token_set=True)


def test_a_budget_in_gib_feeds_the_mods_flag_and_the_fit_reads_gib(tmp_path: Path) -> None:
    recipe = load_recipe_file(gib_recipe(tmp_path))  # not refused as "out of range (0, 1]"
    argv = render_argv(recipe, apply_overrides(recipe, []))
    assert argv[-2:] == ["--gpu-memory-utilization-gb", "108"]
    assert "--gpu-memory-utilization" not in argv
    report = check(recipe, [])
    assert report.nodes[0].budget_bytes == 108 * GIB
    assert report.ok, [f.message for f in report.findings]
    # The range is the flag's: any GiB > 0 goes, a fraction's bound does not apply ...
    assert check(recipe, ["gpu_memory_utilization=100"]).nodes[0].budget_bytes == 100 * GIB
    with pytest.raises(OverrideError) as exc:
        apply_overrides(recipe, ["gpu_memory_utilization=0"])
    assert "--gpu-memory-utilization-gb" in exc.value.message
    # ... and a budget past the node's free memory is named in the mod's words, with a
    # remedy in GiB on the recipe's own key.
    over = check(recipe, ["gpu_memory_utilization=118"])
    found = next(f for f in over.findings if f.code in ("free_memory", "page_cache"))
    assert "Requested memory (118.00 GiB) exceeds available memory" in found.message
    assert "--set gpu_memory_utilization=1" in found.remedy and "0." not in found.remedy


def test_a_fraction_default_is_still_held_to_its_range(tmp_path: Path) -> None:
    text = GIB_RECIPE.replace("--gpu-memory-utilization-gb", "--gpu-memory-utilization")
    with pytest.raises(RecipeError) as exc:
        load_recipe_file(write(tmp_path, "fraction", text))
    assert "out of range" in exc.value.message
    # The headroom remedy speaks each budget's unit.
    fraction = load_recipe_file(write(tmp_path, "ok", text.replace(": 108", ": 0.95")))
    fits = [check(fraction, []), check(load_recipe_file(gib_recipe(tmp_path)), [])]
    remedies = [next(f for f in r.findings if f.code == "system_headroom").remedy for r in fits]
    assert remedies == [
        "--set gpu_memory_utilization=0.85 (or lower)",
        "--set gpu_memory_utilization=101 (or lower)",
    ]


def test_the_mods_flag_is_unknown_to_the_image_until_the_mod_runs() -> None:
    help_text = (FACTS.parent / "vllm-0.32.0-serve-help-all.txt").read_text(encoding="utf-8")
    table = parse_help(help_text)
    argv = ["vllm", "serve", "m", "--gpu-memory-utilization-gb", "108"]
    assert [p.flag for p in table.check(argv)] == ["--gpu-memory-utilization-gb"]
    assert table.with_mods(["gpu-mem-util-gb"]).check(argv) == []
    assert table.with_mods(["other-mod"]).check(argv) != []


def test_max_model_len_auto_is_fitted_as_vllm_fits_it(tmp_path: Path) -> None:
    text = (
        GIB_RECIPE.replace("max_position_embeddings: 131072", "max_position_embeddings: 1048576")
        .replace("max_model_len: 32768", "max_model_len: auto")
        .replace("gpu_memory_utilization: 108", "gpu_memory_utilization: 80")
    )
    gib_recipe(tmp_path)  # the mod next to the recipe
    recipe = load_recipe_file(write(tmp_path, "auto", text))  # not refused as "not an integer"
    argv = render_argv(recipe, apply_overrides(recipe, []))
    assert argv[argv.index("--max-model-len") + 1] == "auto"
    report = check(recipe, [])
    node = report.nodes[0]
    assert report.ok and node.kv_budget_bytes is not None
    # The model's 1M tokens do not fit the KV cache: vLLM's auto takes the longest that does.
    layout = layout_for(resolve_model_facts(recipe, NODES), parse_serve_args(argv))
    assert layout is not None and report.max_model_len is not None
    assert report.max_model_len < 1048576
    assert layout.request_bytes(report.max_model_len) <= node.kv_budget_bytes
    assert layout.request_bytes(report.max_model_len + 1) > node.kv_budget_bytes
    note = next(f for f in report.findings if f.code == "max_model_len_auto")
    assert f"reduces it to {report.max_model_len} tokens" in note.message
    assert not any(f.code == "kv_max_seq_len" for f in report.findings)
    # More budget, longer; the word (and vLLM's -1) is accepted with --set too.
    more = check(recipe, ["max_model_len=Auto", "gpu_memory_utilization=100"])
    assert more.max_model_len is not None and more.max_model_len > report.max_model_len
    assert check(recipe, ["max_model_len=-1"]).max_model_len == report.max_model_len
    # A model whose maximum fits keeps it.
    fits = load_recipe_file(write(tmp_path, "fits", GIB_RECIPE))
    whole = check(fits, ["max_model_len=auto"])
    assert whole.max_model_len == 131072 and whole.ok
    assert any(f.code == "max_model_len_auto" and "fits" in f.message for f in whole.findings)


# A registry recipe whose command leaves the parallel sizes out, its defaults at vLLM's.
SOLO = """\
recipe_version: "2"
model: Org/Dense-70B
container: img:1
defaults:
  port: 8000
  tensor_parallel: 1
  pipeline_parallel: 1
  data_parallel: 1
command: |
  vllm serve {model} --port {port}
"""


def test_parallel_sizes_at_vllms_default_are_not_added(tmp_path: Path) -> None:
    recipe = load_recipe_file(write(tmp_path, "solo", SOLO))
    plan = build_plan(recipe, apply_overrides(recipe, []), NODES[:1])
    # The serve flags sparkrun renders for it: the template's, nothing added.
    assert plan.ranks[0].argv == ["vllm", "serve", "Org/Dense-70B", "--port", "8000"]
    assert (plan.tensor_parallel, plan.data_parallel) == (1, 1)
    # A size that is not vLLM's default is added; one the template writes is replaced.
    two = build_plan(recipe, apply_overrides(recipe, ["tensor_parallel=2"]), NODES)
    assert two.ranks[0].argv[3:7] == ["--port", "8000", "--tensor-parallel-size", "2"]
    written = load_recipe_file(write(tmp_path, "written", SOLO.replace("{port}", "{port} -tp 2")))
    argv = render_argv(written, apply_overrides(written, ["tensor_parallel=1"]))
    assert argv[-2:] == ["-tp", "1"]


# Model facts in sparkrun's metadata names (what its VRAM estimate reads).
SPARKRUN_META = """\
recipe_version: "2"
model: Org/Dense-32B
container: img:1
metadata:
  model_params: 32.8B
  model_dtype: bf16
  model_vram: 25.5
  num_layers: 64
  num_kv_heads: 8
  head_dim: 128
  kv_dtype: fp8
  quant_bits: 16
defaults:
  port: 8000
  max_model_len: 32768
command: |
  vllm serve {model} --port {port} --max-model-len {max_model_len}
"""


def test_sparkruns_metadata_names_are_read_and_the_rest_named(tmp_path: Path) -> None:
    recipe = load_recipe_file(write(tmp_path, "dense-32b", SPARKRUN_META))
    facts = resolve_model_facts(recipe, [])
    assert facts.params == 32_800_000_000 and facts.dtype == "bfloat16"
    assert facts.weight_bytes == int(25.5 * GIB)  # model_vram (GiB) before params x dtype
    assert (facts.num_hidden_layers, facts.num_key_value_heads, facts.head_dim) == (64, 8, 128)
    assert facts.sources["params"] == "recipe metadata (sparkrun's model_params)"
    assert facts.sources["weight_bytes"] == "recipe metadata (sparkrun's model_vram, GiB)"
    assert facts.sources["num_hidden_layers"] == "recipe metadata (sparkrun's num_layers)"
    assert facts.sources["num_key_value_heads"] == "recipe metadata (sparkrun's num_kv_heads)"
    report = check(recipe, [])
    for known in ("weight_bytes", "num_hidden_layers", "num_key_value_heads", "head_dim", "dtype"):
        assert known not in report.missing
    assert report.nodes[0].weights_bytes is not None
    note = next(f for f in report.findings if f.code == "metadata_ignored")
    assert "kv_dtype" in note.message and "quant_bits" in note.message
    # Without model_vram the weights follow from the parameter count, a quantized dtype's.
    quantized = SPARKRUN_META.replace("  model_vram: 25.5\n", "").replace("bf16", "nvfp4")
    facts = resolve_model_facts(load_recipe_file(write(tmp_path, "q", quantized)), [])
    assert facts.quantization == "nvfp4" and facts.weight_bytes == 32_800_000_000 // 2
    with pytest.raises(RecipeError, match="model_params"):
        load_recipe_file(write(tmp_path, "bad", SPARKRUN_META.replace("32.8B", "lots")))


def test_vllms_serve_names_are_taken_by_set_as_well_as_the_recipe_keys(tmp_path: Path) -> None:
    recipe = load_recipe_file(write(tmp_path, "solo", SOLO))
    settings = apply_overrides(recipe, ["tensor_parallel_size=2", "max-num-seqs=8"])
    assert settings["tensor_parallel"] == 2 and settings["max_num_seqs"] == 8
    assert "tensor_parallel_size" not in settings
    # The serve name of a flag the recipe feeds from its own key sets that key.
    gib = load_recipe_file(gib_recipe(tmp_path))
    assert apply_overrides(gib, ["max_model_len=4096"])["max_model_len"] == 4096
    tp_key = (
        "model: Org/M\ncontainer: img:1\ndefaults: {tp: 1}\ncommand: vllm serve {model} -tp {tp}\n"
    )
    fed = load_recipe_file(write(tmp_path, "fed", tp_key))
    settings = apply_overrides(fed, ["tensor_parallel_size=2"])
    assert settings["tp"] == 2
    assert render_argv(fed, settings)[-2:] == ["-tp", "2"]

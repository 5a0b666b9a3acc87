"""Recipes as sparkrun's registries write them (eugr's v1 files, its mods, its metadata),
read from files this test writes: rendered, checked and planned as sparkrun runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tui.core.errors import RecipeError
from spark_tui.core.facts import NodeFacts, parse_facts
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe_loader import load_recipe_file
from spark_tui.core.render import render_argv

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

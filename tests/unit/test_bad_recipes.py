"""Bad recipes end as a RecipeError naming the file and line, never as a traceback."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from spark_tui.core.errors import RecipeError
from spark_tui.core.recipe_loader import list_recipes, load_recipe_file, parse_recipe

GOOD = """\
recipe_version: "2"
model: org/m
container: img:1
defaults:
  tensor_parallel: 1
command: |
  vllm serve {model} --tensor-parallel-size {tensor_parallel}
"""

# A 294-byte billion-laughs document: 9**7 values once the aliases are expanded.
ALIAS_BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "model: *g\n"
    "command: *g\n"
)


def _error(text: str, name: str = "r") -> RecipeError:
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, name, path=f"/recipes/{name}.yaml")
    return info.value


@pytest.mark.parametrize(
    ("text", "line"),
    [
        # a key without its colon: the scanner notices only on the next line
        ("model: x\ncommand\ndefaults: {}\n", 2),
        # a quote that never closes: the scanner gives up at the end of the file
        ('model: x\ncommand: "vllm serve\ndefaults: {}\n', 2),
        # a key indented one space too far
        ("model: x\ndefaults:\n  a: 1\n   b: 2\ncommand: y\n", 4),
        # a list item dedented out of its list
        ("model: x\nmods:\n  - a\n - b\n", 4),
    ],
)
def test_yaml_error_names_the_offending_line(text: str, line: int) -> None:
    err = _error(text)
    assert err.message.startswith(f"/recipes/r.yaml:{line}:"), err.message
    assert "YAML syntax error" in err.message
    assert err.remedy


def test_deep_nesting_is_refused_with_its_line() -> None:
    text = GOOD + "metadata:\n  x: " + "[" * 3000 + "]" * 3000 + "\n"
    err = _error(text)
    assert err.message.startswith("/recipes/r.yaml:9:")
    assert "nested more than" in err.message
    block = GOOD + "metadata:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(300))
    assert "nested more than" in _error(block).message


def test_alias_bomb_is_refused_small_and_fast() -> None:
    assert len(ALIAS_BOMB) < 400
    tracemalloc.start()
    try:
        err = _error(ALIAS_BOMB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "aliases" in err.message and "expand" in err.message
    assert len(str(err)) < 1000
    assert peak < 5 * 2**20


def test_alias_that_contains_itself_is_refused() -> None:
    err = _error("model: &a [*a]\ncommand: x\n")
    assert "contains it" in err.message


def test_a_large_value_in_an_error_is_quoted_short() -> None:
    # 150 values x 100 characters: no bound is hit, but the type error must not quote it all.
    items = ", ".join('"' + "x" * 100 + '"' for _ in range(150))
    err = _error(f"model: [{items}]\ncommand: vllm serve m\n")
    assert "model" in err.message and len(err.message) < 400


def test_error_text_is_capped() -> None:
    err = RecipeError("m" * 100_000, "r" * 100_000)
    assert len(err.message) <= 2000 and len(err.remedy) <= 2000
    assert "characters cut" in err.message


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("metadata:\n  head_dim: 1.0e+308\n", "head_dim"),
        ("metadata:\n  weight_bytes: .inf\n", "weight_bytes"),
        ("metadata:\n  weight_bytes: .nan\n", "weight_bytes"),
        ("metadata:\n  num_hidden_layers: 100000000000000000000\n", "num_hidden_layers"),
        ("metadata:\n  head_dim: 99999999\n", "head_dim"),
        ("metadata:\n  num_attention_heads: 0\n", "num_attention_heads"),
        ("metadata:\n  weight_bytes: 9999999 TiB\n", "weight_bytes"),
        (
            "metadata:\n  config:\n    max_position_embeddings: 4096\n"
            "    rope_scaling: {rope_type: yarn, factor: .inf}\n",
            "factor",
        ),
        ("executor_config:\n  timeout: -.inf\n", "timeout"),
    ],
)
def test_unusable_numbers_are_refused_naming_the_key(extra: str, key: str) -> None:
    err = _error(GOOD + extra)
    assert err.message.startswith("/recipes/r.yaml")
    assert key in err.message
    assert err.remedy


@pytest.mark.parametrize(
    "default",
    ["tensor_parallel: 100000000", "max_model_len: 100000000000000", "max_num_seqs: 0"],
)
def test_known_defaults_out_of_range_are_refused(default: str) -> None:
    text = GOOD.replace("  tensor_parallel: 1\n", f"  tensor_parallel: 1\n  {default}\n", 1)
    if default.startswith("tensor_parallel"):
        text = GOOD.replace("tensor_parallel: 1", default)
    err = _error(text)
    assert default.split(":")[0] in err.message and "out of range" in err.message


def test_one_bad_user_recipe_never_stops_the_others(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    bundled = tmp_path / "bundled"
    bundled.mkdir()
    (user / "good.yaml").write_text(GOOD)
    (user / "deep.yaml").write_text(GOOD + "metadata:\n  x: " + "[" * 5000 + "]" * 5000 + "\n")
    (user / "bomb.yaml").write_text(ALIAS_BOMB)
    (user / "huge.yaml").write_text(GOOD + "metadata:\n  head_dim: 1.0e+308\n")
    errors: list[RecipeError] = []
    recipes = list_recipes(user_dir=user, bundled_dir=bundled, errors=errors)
    assert [r.name for r in recipes] == ["good"]
    named = sorted(Path(e.message.split(":", 1)[0]).name for e in errors)
    assert named == ["bomb.yaml", "deep.yaml", "huge.yaml"]


def test_a_good_recipe_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(
        GOOD + "metadata:\n  head_dim: 128\n  weight_bytes: 48 GiB\n  num_hidden_layers: 48\n"
        "shared: &s {a: 1}\nother: *s\n"
    )
    recipe = load_recipe_file(path)
    assert recipe.extra["other"] == {"a": 1}


@pytest.mark.parametrize(
    "text",
    [
        '{"nodes": [{"name": "a", "address": "h", "memory_total_bytes": Infinity}]}',
        '{"nodes": [{"name": "a", "address": "h", "models": [{"repo_id": "m", '
        '"config": {"rope_scaling": {"rope_type": "yarn", "factor": 1e999}}}]}]}',
        '{"nodes": ' + "[" * 5000 + "]" * 5000 + "}",
    ],
)
def test_facts_files_with_unusable_numbers_or_depth_are_refused(text: str) -> None:
    from spark_tui.core.errors import FactsError
    from spark_tui.core.facts import parse_facts

    with pytest.raises(FactsError) as err:
        parse_facts(text, source="facts.json")
    assert err.value.message.startswith("facts.json") and err.value.remedy

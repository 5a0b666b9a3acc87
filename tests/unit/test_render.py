"""render_argv / render_env: placeholders per token, flags replaced, appended or removed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_tui.core import settings_schema as schema
from spark_tui.core.errors import RecipeError
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.recipe import Recipe
from spark_tui.core.recipe_loader import parse_recipe
from spark_tui.core.render import (
    apply_flag,
    flag_value,
    has_flag,
    placeholders,
    render_argv,
    render_env,
    split_command,
)

COMMAND = """vllm serve {model} \\
  --host {host} \\
  --port {port} \\
  --max-num-seqs 4 \\
  --enable-prefix-caching \\
  --no-enable-flashinfer-autotune \\
  --tool-call-parser glm47 \\
  --enable-auto-tool-choice \\
  --speculative-config '{"method":"mtp","num_speculative_tokens":5}' \\
  --gpu-memory-utilization={gpu_memory_utilization}
"""


def make(command: str = COMMAND, **defaults: object) -> Recipe:
    base: dict[str, object] = {"host": "0.0.0.0", "port": 8000, "gpu_memory_utilization": 0.87}
    base.update(defaults)
    return Recipe(name="t", model="org/model", command=command, defaults=base)


def test_template_split_and_substituted() -> None:
    r = make()
    argv = render_argv(r, apply_overrides(r, []))
    assert argv == [
        "vllm", "serve", "org/model",
        "--host", "0.0.0.0",
        "--port", "8000",
        "--max-num-seqs", "4",
        "--enable-prefix-caching",
        "--no-enable-flashinfer-autotune",
        "--tool-call-parser", "glm47",
        "--enable-auto-tool-choice",
        "--speculative-config", '{"method":"mtp","num_speculative_tokens":5}',
        "--gpu-memory-utilization=0.87",
    ]  # fmt: skip


def test_hard_coded_value_replaced_not_duplicated() -> None:
    r = make()
    argv = render_argv(r, apply_overrides(r, ["max_num_seqs=8"]))
    assert argv.count("--max-num-seqs") == 1
    assert flag_value(argv, "--max-num-seqs") == "8"
    # replaced in place: the flag keeps its position after --port
    assert argv.index("--max-num-seqs") == argv.index("--port") + 2


def test_equals_form_placeholder_and_override() -> None:
    r = make()
    argv = render_argv(r, apply_overrides(r, ["gpu_memory_utilization=0.5"]))
    assert "--gpu-memory-utilization=0.5" in argv
    # a non-placeholder flag written as --flag=value is replaced in the same form
    r2 = make(command="vllm serve {model} --max-num-seqs=4")
    argv2 = render_argv(r2, {"max_num_seqs": 16})
    assert argv2 == ["vllm", "serve", "org/model", "--max-num-seqs=16"]


def test_absent_flag_is_appended() -> None:
    r = make()
    argv = render_argv(r, apply_overrides(r, ["max_model_len=32768", "kv_cache_dtype=fp8"]))
    assert argv[-4:] == ["--max-model-len", "32768", "--kv-cache-dtype", "fp8"]


def test_none_and_false_remove_flags() -> None:
    r = make()
    argv = render_argv(
        r, apply_overrides(r, ["tool_call_parser=none", "enable_auto_tool_choice=false"])
    )
    assert not has_flag(argv, "--tool-call-parser")
    assert "glm47" not in argv
    assert "--enable-auto-tool-choice" not in argv
    assert "--no-enable-auto-tool-choice" not in argv


def test_false_for_a_default_on_feature_uses_the_no_form() -> None:
    r = make()
    argv = render_argv(r, apply_overrides(r, ["enable_prefix_caching=false"]))
    assert "--enable-prefix-caching" not in argv
    assert argv.count("--no-enable-prefix-caching") == 1
    argv = render_argv(r, apply_overrides(r, ["enable_flashinfer_autotune=true"]))
    assert "--no-enable-flashinfer-autotune" not in argv
    assert argv.count("--enable-flashinfer-autotune") == 1


def test_duplicate_template_flags_collapse_to_one() -> None:
    r = make(command="vllm serve {model} --max-num-seqs 4 --dtype auto --max-num-seqs=2")
    argv = render_argv(r, {"max_num_seqs": 8})
    assert argv == ["vllm", "serve", "org/model", "--max-num-seqs", "8", "--dtype", "auto"]


def test_alias_spelling_is_replaced() -> None:
    r = make(command="vllm serve {model} -tp 1")
    assert render_argv(r, {"tensor_parallel": 2}) == ["vllm", "serve", "org/model", "-tp", "2"]


def test_removed_placeholder_takes_its_flag() -> None:
    r = Recipe(
        name="t",
        model="org/model",
        command="vllm serve {model} --reasoning-parser {reasoning_parser} --port {port}",
        defaults={"reasoning_parser": "qwen3", "port": 8000},
    )
    argv = render_argv(r, apply_overrides(r, ["reasoning_parser=none"]))
    assert argv == ["vllm", "serve", "org/model", "--port", "8000"]


def test_plan_managed_settings_are_left_to_the_plan() -> None:
    r = make(command="vllm serve {model}")
    assert render_argv(r, {"master_port": 29600}) == ["vllm", "serve", "org/model"]


def test_unknown_non_placeholder_default_does_not_become_a_flag() -> None:
    r = make(command="vllm serve {model}", my_note="x")
    assert render_argv(r, {"my_note": "x"}) == ["vllm", "serve", "org/model"]


def test_missing_placeholder_value_names_it() -> None:
    r = make(command="vllm serve {model} --max-num-seqs {max_num_seqs}")
    with pytest.raises(RecipeError) as exc:
        render_argv(r, {})
    assert "{max_num_seqs}" in exc.value.message
    assert "defaults" in exc.value.remedy


def test_command_must_start_with_vllm() -> None:
    r = make(command="python -m vllm.entrypoints.openai.api_server --model {model}")
    with pytest.raises(RecipeError) as exc:
        render_argv(r, {})
    assert "vllm serve" in exc.value.remedy


def test_unbalanced_quote_is_a_recipe_error() -> None:
    with pytest.raises(RecipeError) as exc:
        split_command('vllm serve x --speculative-config \'{"a":1}', "bad")
    assert "bad" in exc.value.message


def test_v1_doubled_braces_collapse_but_v2_json_does_not() -> None:
    v1 = Recipe(
        name="v1",
        model="m",
        recipe_version="1",
        command="vllm serve {model} --override-generation-config '{{\"temperature\": 0.7}}'",
    )
    assert render_argv(v1, {})[-1] == '{"temperature": 0.7}'
    v2 = Recipe(
        name="v2", model="m", command="""vllm serve {model} --hf-overrides '{"a":{"b":1}}'"""
    )
    assert render_argv(v2, {})[-1] == '{"a":{"b":1}}'


def test_placeholders_listing_ignores_json_and_escapes() -> None:
    assert placeholders(COMMAND) == ["model", "host", "port", "gpu_memory_utilization"]
    assert placeholders("x {{name}} {real}") == ["real"]


def test_injection_value_is_one_literal_argument() -> None:
    r = Recipe(
        name="t", model="m", command="vllm serve {model} --port {port}", defaults={"port": 8000}
    )
    settings_ = apply_overrides(r, ["served_model_name=4096; rm -rf /"])
    argv = render_argv(r, settings_)
    assert argv == ["vllm", "serve", "m", "--port", "8000", "--served-model-name", "4096; rm -rf /"]


def test_render_env_values_are_strings() -> None:
    r = parse_recipe(
        'model: m\ncommand: vllm serve {model}\nenv:\n  A: 1\n  B: "x"\n  C: true\n  D: "${HF_TOKEN}"\n',
        "e",
    )
    assert render_env(r) == {"A": "1", "B": "x", "C": "true", "D": "${HF_TOKEN}"}


def test_apply_flag_multi_value_served_model_name() -> None:
    setting = schema.SETTINGS["served_model_name"]
    argv = ["vllm", "serve", "m", "--served-model-name", "a", "b", "--port", "1"]
    assert apply_flag(argv, setting, "c") == [
        "vllm",
        "serve",
        "m",
        "--served-model-name",
        "c",
        "--port",
        "1",
    ]


# Any text at all (but NUL, which no argv can carry) stays exactly one argument.
_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(value=_TEXT)
def test_placeholder_value_never_splits(value: str) -> None:
    r = Recipe(
        name="p",
        model="m",
        command="vllm serve {model} \\\n  --chat-template {chat_template} --port 8000",
        defaults={"chat_template": value},
    )
    argv = render_argv(r, dict(r.defaults))
    assert argv == ["vllm", "serve", "m", "--chat-template", value, "--port", "8000"]


@settings(max_examples=150, deadline=None)
@given(value=_TEXT.filter(lambda v: not v.startswith("-")))
def test_flag_value_never_splits(value: str) -> None:
    r = Recipe(
        name="p", model="m", command="vllm serve {model} --served-model-name old --port 8000"
    )
    argv = render_argv(r, {"served_model_name": value})
    assert argv == ["vllm", "serve", "m", "--served-model-name", value, "--port", "8000"]

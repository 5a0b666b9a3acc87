"""--set overrides: parsing, typing against defaults and the schema, ranges, removal, diff."""

from __future__ import annotations

import pytest

from spark_tui.core.errors import EXIT_USAGE, OverrideError
from spark_tui.core.overrides import apply_overrides, parse_set, settings_diff, valid_keys
from spark_tui.core.recipe import Recipe
from spark_tui.core.render import render_argv


@pytest.fixture()
def recipe() -> Recipe:
    return Recipe(
        name="r",
        model="org/m",
        command=(
            "vllm serve {model} --port {port} --tensor-parallel-size {tensor_parallel} "
            "--max-num-batched-tokens {max_num_batched_tokens} --tool-call-parser glm47 "
            "--enable-auto-tool-choice --label {my_label}"
        ),
        defaults={
            "port": 8000,
            "tensor_parallel": 2,
            "gpu_memory_utilization": 0.87,
            "max_num_seqs": 4,
            "max_num_batched_tokens": 4096,
            "my_label": "a",
            "my_level": 3,
        },
    )


def reject(recipe: Recipe, item: str) -> OverrideError:
    with pytest.raises(OverrideError) as exc:
        apply_overrides(recipe, [item])
    assert exc.value.exit_code == EXIT_USAGE
    return exc.value


def test_parse_set() -> None:
    assert parse_set("max_num_seqs=8") == ("max_num_seqs", "8")
    assert parse_set("--max-num-seqs=8") == ("max_num_seqs", "8")
    assert parse_set("served_model_name=a=b") == ("served_model_name", "a=b")
    with pytest.raises(OverrideError) as exc:
        parse_set("max_num_seqs")
    assert "KEY=VALUE" in exc.value.message and "--set key=value" in exc.value.remedy
    with pytest.raises(OverrideError):
        parse_set("9x=1")


def test_ints_stay_ints(recipe: Recipe) -> None:
    s = apply_overrides(recipe, ["max_num_seqs=8", "tensor_parallel=1"])
    assert s["max_num_seqs"] == 8 and isinstance(s["max_num_seqs"], int)
    assert s["tensor_parallel"] == 1
    err = reject(recipe, "max_num_seqs=8.5")
    assert "max_num_seqs" in err.message and "'8.5'" in err.message
    assert "integer" in err.remedy


def test_defaults_untouched_when_no_sets(recipe: Recipe) -> None:
    assert apply_overrides(recipe, []) == recipe.defaults
    assert apply_overrides(recipe, []) is not recipe.defaults


def test_gpu_memory_utilization_range(recipe: Recipe) -> None:
    assert apply_overrides(recipe, ["gpu_memory_utilization=0.5"])["gpu_memory_utilization"] == 0.5
    assert apply_overrides(recipe, ["gpu_memory_utilization=1"])["gpu_memory_utilization"] == 1.0
    for bad in ("0", "1.01", "-0.2", "abc", "nan"):
        err = reject(recipe, f"gpu_memory_utilization={bad}")
        assert "gpu_memory_utilization" in err.message
        assert "(0, 1]" in err.remedy


def test_parallel_sizes_and_ports(recipe: Recipe) -> None:
    err = reject(recipe, "tensor_parallel=0")
    assert "from 1 to 1024" in err.remedy
    reject(recipe, "pipeline_parallel=-1")
    reject(recipe, "data_parallel=two")
    assert "1 to 65535" in reject(recipe, "port=70000").remedy
    reject(recipe, "port=0")
    reject(recipe, "master_port=65536")
    assert apply_overrides(recipe, ["master_port=29600"])["master_port"] == 29600


def test_booleans(recipe: Recipe) -> None:
    for word, value in [("true", True), ("On", True), ("yes", True), ("1", True),
                        ("false", False), ("off", False), ("NO", False), ("0", False)]:  # fmt: skip
        assert (
            apply_overrides(recipe, [f"enable_prefix_caching={word}"])["enable_prefix_caching"]
            is value
        )
    err = reject(recipe, "enable_prefix_caching=maybe")
    assert "true or false" in err.remedy


def test_sizes(recipe: Recipe) -> None:
    def size(text: str) -> int:
        return int(
            apply_overrides(recipe, [f"kv_cache_memory_bytes={text}"])["kv_cache_memory_bytes"]
        )

    assert size("3G") == 3 * 2**30  # vLLM reads an upper-case suffix as binary
    assert size("3GiB") == 3 * 2**30
    assert size("3GB") == 3 * 10**9
    assert size("3g") == 3 * 10**9
    assert size("1048576") == 1048576
    assert "3GiB" in reject(recipe, "kv_cache_memory_bytes=lots").remedy
    reject(recipe, "kv_cache_memory_bytes=0")


def test_human_readable_context_lengths(recipe: Recipe) -> None:
    assert apply_overrides(recipe, ["max_model_len=128k"])["max_model_len"] == 128000
    assert apply_overrides(recipe, ["max_model_len=128K"])["max_model_len"] == 131072
    reject(recipe, "max_num_seqs=8k")  # only the context-length settings take suffixes


def test_choices_and_json(recipe: Recipe) -> None:
    assert apply_overrides(recipe, ["kv_cache_dtype=FP8"])["kv_cache_dtype"] == "fp8"
    assert "fp8" in reject(recipe, "kv_cache_dtype=fp7").remedy
    spec = '{"method":"mtp","num_speculative_tokens":4}'
    assert apply_overrides(recipe, [f"speculative_config={spec}"])["speculative_config"] == spec
    assert "JSON" in reject(recipe, "speculative_config={method: mtp}").message
    reject(recipe, "speculative_config=[1,2]")


def test_unknown_key_lists_valid_keys_and_close_match(recipe: Recipe) -> None:
    err = reject(recipe, "max_num_seq=8")
    assert "did you mean max_num_seqs" in err.message
    assert "my_level" in err.remedy and "gpu_memory_utilization" in err.remedy
    err = reject(recipe, "model=other/model")
    assert "model" in err.message and "recipe" in err.remedy
    assert "my_label" in valid_keys(recipe)


def test_custom_default_typed_from_default(recipe: Recipe) -> None:
    assert apply_overrides(recipe, ["my_level=4"])["my_level"] == 4
    assert "integer" in reject(recipe, "my_level=high").remedy
    assert apply_overrides(recipe, ["my_label=b c"])["my_label"] == "b c"


def test_none_removes_and_renders_without_the_flag(recipe: Recipe) -> None:
    s = apply_overrides(recipe, ["tool_call_parser=none", "enable_auto_tool_choice=false"])
    assert s["tool_call_parser"] is None and s["enable_auto_tool_choice"] is False
    argv = render_argv(recipe, s)
    assert "--tool-call-parser" not in argv and "glm47" not in argv
    assert "--enable-auto-tool-choice" not in argv
    assert apply_overrides(recipe, ["reasoning_parser="])["reasoning_parser"] is None
    assert "cannot be removed" in reject(recipe, "tensor_parallel=none").message


def test_injection_rejected_for_int_and_literal_for_string(recipe: Recipe) -> None:
    err = reject(recipe, "max_num_batched_tokens=4096; rm -rf /")
    assert "max_num_batched_tokens" in err.message and "4096; rm -rf /" in err.message
    s = apply_overrides(recipe, ["served_model_name=4096; rm -rf /"])
    argv = render_argv(recipe, s)
    assert argv[-2:] == ["--served-model-name", "4096; rm -rf /"]
    assert sum("rm -rf" in a for a in argv) == 1


def test_string_value_may_not_look_like_an_option(recipe: Recipe) -> None:
    assert "'-'" in reject(recipe, "served_model_name=--api-key x").message


def test_mapping_input(recipe: Recipe) -> None:
    s = apply_overrides(recipe, {"max_num_seqs": 16, "gpu_memory_utilization": "0.8"})
    assert s["max_num_seqs"] == 16 and s["gpu_memory_utilization"] == 0.8
    with pytest.raises(OverrideError):
        apply_overrides(recipe, {"max_num_seqs": True})
    assert (
        apply_overrides(recipe, {"speculative_config": {"method": "mtp"}})["speculative_config"]
        == '{"method":"mtp"}'
    )


def test_settings_diff(recipe: Recipe) -> None:
    base = apply_overrides(recipe, [])
    new = apply_overrides(recipe, ["max_num_seqs=8", "tool_call_parser=none", "port=8000"])
    # without the recipe, removing a flag the template hard-codes is invisible: pass the recipe
    # removing the parser turns tool choice off with it (vLLM refuses one without the other)
    assert settings_diff(base, new) == {
        "max_num_seqs": (4, 8),
        "enable_auto_tool_choice": (None, False),
    }
    assert settings_diff(base, new, recipe) == {
        "max_num_seqs": (4, 8),
        "tool_call_parser": ("glm47", None),
        "enable_auto_tool_choice": (True, False),
    }
    new = apply_overrides(recipe, ["enable_auto_tool_choice=false"])
    assert settings_diff(base, new, recipe) == {"enable_auto_tool_choice": (True, False)}
    new = apply_overrides(recipe, ["enable_prefix_caching=false"])
    assert settings_diff(base, new) == {"enable_prefix_caching": (None, False)}
    assert settings_diff({"a": 1}, {"a": 1.0}) == {}
    assert settings_diff({"a": 1}, {"a": True}) == {"a": (1, True)}
    assert settings_diff(base, base) == {}

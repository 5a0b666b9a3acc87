"""Settings that depend on each other are removed or refused together, and the fit check
says what vLLM's own argument checks will refuse."""

from __future__ import annotations

import shlex

import pytest

from spark_tui.core.errors import OverrideError
from spark_tui.core.facts import GIB, NodeFacts
from spark_tui.core.fit import check_fit
from spark_tui.core.model_facts import facts_from_metadata
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.recipe import Recipe
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.render import render_argv

VLLM_WORDS = "Error: --enable-auto-tool-choice requires --tool-call-parser"


def _tools_recipe(command: str) -> Recipe:
    return Recipe(
        name="tools",
        model="org/m",
        command=command,
        container="img:1",
        defaults={"parser": "hermes"} if "{parser}" in command else {},
    )


def _node(name: str = "a") -> NodeFacts:
    return NodeFacts(
        name=name, address="10.0.0.1", memory_total_bytes=128 * GIB,
        memory_available_bytes=120 * GIB,
    )  # fmt: skip


def _facts():  # type: ignore[no-untyped-def]
    return facts_from_metadata(
        "org/m",
        {
            "weight_bytes": 8 * GIB,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 32768,
            "attention": "full",
        },
    )


def test_removing_the_parser_removes_tool_choice_with_it() -> None:
    recipe = find_recipe("glm-5.3-flash")
    argv = render_argv(recipe, apply_overrides(recipe, ["tool_call_parser=none"]))
    assert "--tool-call-parser" not in argv
    assert "--enable-auto-tool-choice" not in argv


def test_tool_choice_on_without_a_parser_is_refused() -> None:
    recipe = find_recipe("glm-5.3-flash")
    with pytest.raises(OverrideError) as err:
        apply_overrides(recipe, ["tool_call_parser=none", "enable_auto_tool_choice=true"])
    assert VLLM_WORDS in err.value.message
    assert "--set tool_call_parser=" in err.value.remedy
    bare = _tools_recipe("vllm serve {model}")
    with pytest.raises(OverrideError) as err:
        apply_overrides(bare, ["enable_auto_tool_choice=true"])
    assert "the recipe sets no tool_call_parser" in err.value.message
    # with a parser given in the same breath it is fine
    argv = render_argv(
        bare, apply_overrides(bare, ["enable_auto_tool_choice=true", "tool_call_parser=hermes"])
    )
    assert "--enable-auto-tool-choice" in argv and "hermes" in argv


def test_check_predicts_the_refusal_in_vllm_words() -> None:
    # The parser comes from a recipe placeholder of its own name: removing it leaves
    # --enable-auto-tool-choice alone, which vLLM refuses at startup.
    recipe = _tools_recipe(
        "vllm serve {model} --enable-auto-tool-choice --tool-call-parser {parser}"
    )
    argv = render_argv(recipe, apply_overrides(recipe, ["parser=none"]))
    assert "--enable-auto-tool-choice" in argv and "--tool-call-parser" not in argv
    report = check_fit(recipe, argv, {}, [_node()], _facts())
    found = [f for f in report.findings if f.code == "tool_choice_without_parser"]
    assert found and found[0].severity == "error"
    assert VLLM_WORDS in found[0].message
    assert "--set tool_call_parser=" in found[0].remedy
    assert "--set enable_auto_tool_choice=false" in found[0].remedy
    assert report.verdict == "does_not_fit"
    fine = shlex.split("vllm serve org/m --enable-auto-tool-choice --tool-call-parser hermes")
    assert all(
        f.code != "tool_choice_without_parser"
        for f in check_fit(recipe, fine, {}, [_node()], _facts()).findings
    )


def test_check_blocks_a_variable_the_recipe_does_not_declare() -> None:
    recipe = _tools_recipe("vllm serve {model}")
    argv = render_argv(
        recipe, apply_overrides(recipe, ["served_model_name=${AWS_SECRET_ACCESS_KEY}"])
    )
    report = check_fit(recipe, argv, {}, [_node()], _facts())
    found = [f for f in report.findings if f.code == "undeclared_variable"]
    assert found and found[0].severity == "error" and report.verdict == "does_not_fit"
    assert "${AWS_SECRET_ACCESS_KEY}" in found[0].message
    assert "env:" in found[0].remedy
    declared = check_fit(recipe, argv, {"AWS_SECRET_ACCESS_KEY": "${AWS_SECRET_ACCESS_KEY}"},
                         [_node()], _facts())  # fmt: skip
    assert all(f.code != "undeclared_variable" for f in declared.findings)


def test_check_predicts_log_outputs_without_log_requests() -> None:
    recipe = _tools_recipe("vllm serve {model}")
    bad = shlex.split("vllm serve org/m --enable-log-outputs --max-num-seqs 4")
    found = [f for f in check_fit(recipe, bad, {}, [_node()], _facts()).findings
             if f.code == "log_outputs_without_requests"]  # fmt: skip
    assert found and "--enable-log-outputs requires --enable-log-requests" in found[0].message
    good = shlex.split("vllm serve org/m --enable-log-outputs --enable-log-requests")
    assert all(
        f.code != "log_outputs_without_requests"
        for f in check_fit(recipe, good, {}, [_node()], _facts()).findings
    )

"""The flag table read from real `vllm serve --help=all` (vLLM 0.32.0, captured from the lab's
install) and the check of rendered commands against it."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui.core.serve_flags import describe, parse_help

HELP = Path(__file__).parent.parent / "fixtures" / "vllm-0.32.0-serve-help-all.txt"


@pytest.fixture(scope="module")
def table():  # type: ignore[no-untyped-def]
    return parse_help(HELP.read_text())


def test_the_fixture_names_its_source() -> None:
    first = HELP.read_text().splitlines()[0]
    assert first.startswith("# Source:") and "vllm serve --help=all" in first and "0.32.0" in first


def test_every_spelling_value_and_choice_is_read(table) -> None:  # type: ignore[no-untyped-def]
    assert len(table) > 300
    tp = table.lookup("-tp")
    assert tp is not None and tp.name == "--tensor-parallel-size" and tp.takes_value
    assert table.lookup("--tensor_parallel_size") is tp  # underscores, as vLLM reads them
    eager = table.lookup("--no-enforce-eager")
    assert eager is not None and not eager.takes_value and eager is table.lookup("--enforce-eager")
    dtype = table.lookup("--dtype")
    assert dtype is not None and dtype.choices is not None and "float32" in dtype.choices
    parser = table.lookup("--tool-call-parser")
    assert parser is not None and parser.choices and "hermes" in parser.choices
    assert table.lookup("--headless") is not None and table.lookup("--api-key").nargs_many


def test_a_recipe_command_of_known_flags_passes(table) -> None:  # type: ignore[no-untyped-def]
    argv = (
        "vllm serve org/m --host 0.0.0.0 --port=8000 --tensor_parallel_size 2 --dtype float32 "
        "--enforce-eager --no-enable-prefix-caching --max-model-len 2048 -O3 -cc.mode=0 "
        "--speculative-config.method ngram --api-key a b --enable-auto-tool-choice "
        "--tool-call-parser hermes --nnodes 2 --node-rank 1 --headless"
    ).split()
    assert table.check(argv) == []


def test_unknown_flags_and_bad_choices_are_named(table) -> None:  # type: ignore[no-untyped-def]
    argv = "vllm serve m --no-such-flag --dtype float33 --tool-call-parser hermez".split()
    problems = table.check(argv)
    assert [(p.kind, p.flag, p.value) for p in problems] == [
        ("unknown", "--no-such-flag", None),
        ("choice", "--dtype", "float33"),
        ("choice", "--tool-call-parser", "hermez"),
    ]
    message, remedy = describe(problems[0], "img:1")
    assert (
        "--no-such-flag" in message and "img:1" in message and "unrecognized arguments" in message
    )
    assert remedy
    typo = table.check(["--max-modle-len", "10"])
    assert typo[0].suggestion == "--max-model-len"


def test_a_plugin_may_add_parser_names(table) -> None:  # type: ignore[no-untyped-def]
    argv = "--tool-parser-plugin /p.py --tool-call-parser mine".split()
    assert table.check(argv) == []


def test_text_that_is_not_help_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_help("Traceback (most recent call last):\n  oops\n")

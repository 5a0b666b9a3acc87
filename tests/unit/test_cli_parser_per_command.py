"""`main` builds only the parser of the subcommand it runs: that parser must be the very one
the whole CLI's parser holds (same help, same parse), for every subcommand."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from spark_tui import cli

ARGV = {
    "check": ["check", "r", "--facts", "f.json", "--tp", "2", "--set", "a=1", "-o", "b=2"],
    "plan": ["plan", "r", "--hosts", "a,b", "--shell", "--max-model-len", "8192"],
    "launch": ["launch", "r", "--inventory", "i.yaml", "--wait", "--ready-timeout", "5"],
    "models": ["models", "sync", "r", "--hosts-file", "h.txt", "--json"],
    "images": ["images", "sync", "r", "--sparkrun-cluster", "lab"],
    "tune": ["tune", "r", "--new-baseline", "--concurrency", "1,2", "--gpu-mem", "0.8"],
    "history": ["history", "compare", "a", "b", "--json"],
    "lab": ["lab", "up", "--nodes", "3", "--engine", "vllm"],
    "bench": ["bench", "--base-url", "http://127.0.0.1:8000", "--repeats", "2", "--bogus"],
    "demo": ["demo", "--nodes", "4", "--web", "--port", "0"],
    "sim": ["sim", "--inventory", "i.yaml", "--pace", "0.05"],
}


# The subcommands with actions of their own under them.
NESTED = {"models": ["sync"], "images": ["sync"]}


def help_of(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """What `argv` followed by --help prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        parser.parse_args([*argv, "--help"])
    assert exited.value.code == 0
    return out.getvalue()


def test_the_table_lists_every_subcommand_in_help_order() -> None:
    whole = cli.build_parser()
    assert list(whole.commands) == list(cli.SUBCOMMANDS)
    listing = whole.format_help()
    places = [listing.index(f"\n    {name} ") for name in cli.SUBCOMMANDS]
    assert places == sorted(places)


@pytest.mark.parametrize("name", list(cli.SUBCOMMANDS))
def test_one_subcommand_alone_is_as_in_the_whole_parser(name: str) -> None:
    whole = cli.build_parser()
    alone = cli.build_parser(name)
    assert list(alone.commands) == [name]
    for argv in [[name]] + [[name, action] for action in NESTED.get(name, [])]:
        text = help_of(alone, argv)
        assert text == help_of(whole, argv)
        assert text.startswith(f"usage: spark-tui {' '.join(argv)}")
    argv = ARGV.get(name, [name])
    assert alone.parse_known_args(argv) == whole.parse_known_args(argv)


def test_main_reports_an_unknown_flag_with_the_subcommand_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["plan", "r", "--facts", "f.json", "--tensor-parallel-size", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: spark-tui plan")
    assert "`plan` does not take --tensor-parallel-size" in err

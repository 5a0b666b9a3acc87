"""A remedy the CLI prints names our commands as the user can run them: a command that needs
nodes gets the user's own node flags where the layer that wrote it could not know them."""

from __future__ import annotations

import argparse

import pytest

from spark_tui.commands.terminal import name_nodes, with_nodes

WHERE = "--inventory '/tmp/my inv.yaml'"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "read the head rank's log (`spark-tui logs --rank 0`) for the error",
            f"read the head rank's log (`spark-tui logs {WHERE} --rank 0`) for the error",
        ),
        (
            "inspect them (`spark-tui logs`), then `spark-tui stop`",
            f"inspect them (`spark-tui logs {WHERE}`), then `spark-tui stop {WHERE}`",
        ),
        # Already complete, or a command that needs no nodes: left as written.
        ("`spark-tui status --hosts a,b` lists them", "`spark-tui status --hosts a,b` lists them"),
        ("`spark-tui stop --inventory x.yaml`", "`spark-tui stop --inventory x.yaml`"),
        ("check with `spark-tui recipes`", "check with `spark-tui recipes`"),
        ("`spark-tui statusbar`", "`spark-tui statusbar`"),
        ("spark-tui logs without quotes", "spark-tui logs without quotes"),
    ],
)
def test_commands_in_backquotes_get_the_node_flags(text: str, expected: str) -> None:
    assert with_nodes(text, WHERE) == expected


def test_the_flags_remembered_are_the_ones_the_user_gave() -> None:
    name_nodes(argparse.Namespace(hosts="spark-a,spark-b"))
    assert with_nodes("`spark-tui logs`") == "`spark-tui logs --hosts spark-a,spark-b`"
    # No node flag at all: nothing to repeat, the remedy stays as written.
    name_nodes(argparse.Namespace())
    assert with_nodes("`spark-tui logs`") == "`spark-tui logs`"

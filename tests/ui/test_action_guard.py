"""The one check launch, edit and sync make before they start: each refusal says why."""

from __future__ import annotations

from typing import Any

import pytest

from spark_tui.ui.flows.guard import may_start


class _Screen:
    """What the guard reads of the main screen, and the warnings it shows."""

    def __init__(self, busy: str | None = None, nodes: list[str] | None = None) -> None:
        self.busy = busy
        self.nodes = nodes or []
        self.warnings: list[str] = []

    def notify(self, text: str, severity: str = "information") -> None:
        assert severity == "warning"
        self.warnings.append(text)

    def key_of(self, action: str, default: str) -> str:
        return {"refresh": "F5"}.get(action, default)


RECIPE: Any = object()  # the guard only asks whether there is one


@pytest.mark.parametrize(
    ("recipe", "busy", "nodes", "needs_nodes", "warning"),
    [
        (None, "launching", [], True, "pick a recipe first"),
        (RECIPE, "sync", [], True, "busy: sync"),
        (RECIPE, None, [], True, "no reachable node yet: wait for discovery (F5 refreshes)"),
    ],
)
def test_refusals_say_why(
    recipe: Any, busy: str | None, nodes: list[str], needs_nodes: bool, warning: str
) -> None:
    screen = _Screen(busy, nodes)
    assert may_start(screen, recipe, needs_nodes=needs_nodes) is False  # type: ignore[arg-type]
    assert screen.warnings == [warning]


def test_starts_when_nothing_stands_in_the_way() -> None:
    screen = _Screen(nodes=["spark-a"])
    assert may_start(screen, RECIPE) is True  # type: ignore[arg-type]
    # The edit dialog previews on what it knows: no node yet is no reason to refuse it.
    bare = _Screen()
    assert may_start(bare, RECIPE, needs_nodes=False) is True  # type: ignore[arg-type]
    assert screen.warnings == bare.warnings == []

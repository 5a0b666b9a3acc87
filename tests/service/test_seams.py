"""The service's seams stay explicit: the demo and the tests reach the nodes through the
`Nodes` protocol, never by overriding a private of Session, and no module of the service or
the headless commands reaches another module's private names (read from the source, so a
new subclass or a new private call fails here, not in review)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = [ROOT / "spark_tui" / part for part in ("service", "commands")]
EVERYWHERE = [ROOT / "spark_tui", ROOT / "tests"]


def sources(folders: list[Path]) -> Iterator[tuple[Path, ast.Module]]:
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def session_overrides(tree: ast.Module) -> list[str]:
    """Private methods defined by classes whose bases name a Session (DemoSession, ...)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [ast.unparse(b) for b in node.bases]
        if not any(b.endswith("Session") for b in bases):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and private(item.name):
                found.append(f"{node.name}.{item.name}")
    return found


def foreign_privates(tree: ast.Module) -> list[str]:
    """`from spark_tui.x import _name` and `obj._name` where obj is not self or cls."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spark_tui"):
            found += [f"import {a.name}" for a in node.names if private(a.name)]
        if isinstance(node, ast.Attribute) and private(node.attr):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(ast.unparse(node))
    return found


def test_no_session_is_extended_by_overriding_its_privates() -> None:
    bad = {
        str(path.relative_to(ROOT)): names
        for path, tree in sources(EVERYWHERE)
        if (names := session_overrides(tree))
    }
    assert bad == {}, "implement service.nodes.Nodes instead"


def test_the_service_and_the_commands_call_no_other_modules_privates() -> None:
    bad = {
        str(path.relative_to(ROOT)): names
        for path, tree in sources(PRODUCT)
        if (names := foreign_privates(tree))
    }
    assert bad == {}

"""The service's seams stay explicit: the demo and the tests reach the nodes through the
`Nodes` protocol, never by overriding a private of Session, and no module of the service or
no module of spark_tui reaches another module's private names (read from the source, so a
new subclass or a new private call fails here, not in review)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = [ROOT / "spark_tui"]
# Documented escapes of the standard library and the framework's own hooks, not a module's
# private names: os._exit ends a forked child without running the parent's cleanup, and a
# widget overriding Textual's line renderer calls the one it overrides.
ALLOWED = {"os._exit", "super()._render_line_strip"}
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


def own_privates(tree: ast.Module) -> set[str]:
    """Private names the module itself defines: its functions, methods and self attributes
    (another instance of the module's own class may use them)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {n for n in names if private(n)}


def foreign_privates(tree: ast.Module) -> list[str]:
    """`from spark_tui.x import _name`, `import spark_tui.x._mod` and `obj._name` where obj is
    not self or cls and the module does not define `_name` itself."""
    own = own_privates(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spark_tui"):
            found += [f"import {a.name}" for a in node.names if private(a.name)]
            found += [f"from {node.module}" for part in node.module.split(".") if private(part)]
        if isinstance(node, ast.Import):
            found += [
                f"import {a.name}"
                for a in node.names
                if a.name.startswith("spark_tui") and any(map(private, a.name.split(".")))
            ]
        if isinstance(node, ast.Attribute) and private(node.attr) and node.attr not in own:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(ast.unparse(node))
    return [name for name in found if name not in ALLOWED]


def test_no_session_is_extended_by_overriding_its_privates() -> None:
    bad = {
        str(path.relative_to(ROOT)): names
        for path, tree in sources(EVERYWHERE)
        if (names := session_overrides(tree))
    }
    assert bad == {}, "implement service.nodes.Nodes instead"


def test_no_module_calls_another_modules_privates() -> None:
    bad = {
        str(path.relative_to(ROOT)): names
        for path, tree in sources(PRODUCT)
        if (names := foreign_privates(tree))
    }
    assert bad == {}

"""YAML loading with bounds: nesting depth, alias expansion and error text stay small.

A recipe or inventory is a handful of mappings. A file nested hundreds of levels deep
(RecursionError in the composer), a few bytes of aliases that expand to a billion nodes
(memory, and a repr of the result hundreds of MB long) or an alias that contains itself
is refused here with a `YamlLimitError` that carries the line of the offending node.
"""

from __future__ import annotations

import reprlib
from typing import Any

import yaml

# Far beyond any recipe (defaults -> hf_overrides -> a JSON object is 4 or 5 levels), well
# below the interpreter's recursion limit even when the caller is itself deep in a stack.
MAX_DEPTH = 40
# Nodes the document holds once every alias is expanded (as a consumer walking it sees it).
MAX_NODES = 20_000
# Aliases a document may use at all; recipes use a few to share a block of settings.
MAX_ALIASES = 200
# Longest user value quoted in an error message.
MAX_QUOTED = 80

_repr = reprlib.Repr()
_repr.maxstring = MAX_QUOTED
_repr.maxother = MAX_QUOTED
_repr.maxlevel = 3
_repr.maxdict = 4
_repr.maxlist = 6


def short_repr(value: Any) -> str:
    """A repr of a user value that never grows past a line, however large the value is."""
    text = _repr.repr(value)
    return text if len(text) <= 2 * MAX_QUOTED else text[: 2 * MAX_QUOTED] + "..."


class YamlLimitError(yaml.YAMLError):
    """A document over one of the bounds; `line` and `column` are 1-based when known."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = mark.line + 1 if mark is not None else None
        self.column = mark.column + 1 if mark is not None else None


class BoundedSafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses deep nesting, alias bombs and recursive aliases."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YamlLimitError(
                    f"more than {MAX_ALIASES} aliases (*name) in one document", event.start_mark
                )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, {}, set())
        return node


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """Nodes under `node` with aliases expanded; refuses a node that contains itself."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise YamlLimitError("an alias refers to a node that contains it", node.start_mark)
    open_nodes.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, sizes, open_nodes)
            _check_size(total, node)
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded_size(k, sizes, open_nodes) + _expanded_size(v, sizes, open_nodes)
            _check_size(total, node)
    open_nodes.discard(key)
    sizes[key] = total
    return total


def _check_size(total: int, node: yaml.Node) -> None:
    if total > MAX_NODES:
        raise YamlLimitError(
            f"the aliases (*name) here expand to more than {MAX_NODES:,} values",
            node.start_mark,
        )


def load(text: str) -> Any:
    """Parse one YAML document within the bounds (raises yaml.YAMLError, YamlLimitError)."""
    loader = BoundedSafeLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def error_location(exc: yaml.YAMLError) -> tuple[int | None, int | None, str]:
    """(line, column, problem) of a YAML error, 1-based as editors count.

    For a scanner error ("while scanning a simple key", "... a quoted scalar") the token
    that never ended starts at the context mark; the problem mark is where the scanner
    gave up, usually the next line. A parser error's problem mark is the offending token.
    """
    if isinstance(exc, YamlLimitError):
        return exc.line, exc.column, exc.problem
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["invalid YAML"])[0]
    context = getattr(exc, "context", None)
    problem_mark = getattr(exc, "problem_mark", None)
    context_mark = getattr(exc, "context_mark", None)
    mark = problem_mark
    if isinstance(exc, yaml.scanner.ScannerError) and context_mark is not None:
        mark = context_mark
        problem = f"{problem} ({context})" if context else problem
    elif mark is None:
        mark = context_mark
    if mark is None:
        return None, None, str(problem)
    return mark.line + 1, mark.column + 1, str(problem)

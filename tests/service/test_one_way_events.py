"""The operations hand their events over one way: an op that reports progress takes one
`emit: Emit[its union]` and returns its result; no op takes a second kind of callback
(progress=, on_level=, on_outage=, ...) or returns a stream of events. Only the service turns
what is emitted into the streams the interfaces read (service.event_stream, service.pump).
Read from the operations' signatures, so a second way added back fails here."""

from __future__ import annotations

import ast
import collections.abc
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import spark_tui.ops
from spark_tui.ops.events import Emit


def ops_modules() -> Iterator[ModuleType]:
    for info in pkgutil.iter_modules(spark_tui.ops.__path__):
        yield importlib.import_module(f"spark_tui.ops.{info.name}")


def public_callables(module: ModuleType) -> Iterator[tuple[str, Any]]:
    """The module's own public functions, and its public classes' public methods and
    constructors."""
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(value):
            yield name, value
        elif inspect.isclass(value):
            for attr, member in vars(value).items():
                if inspect.isfunction(member) and (attr == "__init__" or not attr.startswith("_")):
                    yield f"{name}.{attr}", member


def is_none_callback(alias: Any) -> bool:
    """A `Callable[[X, ...], None]`: something to hand values to, that answers nothing (a
    `Callable[[], None]` is an action to trigger, not a hand-over)."""
    if typing.get_origin(alias) is not collections.abc.Callable:
        return False
    takes, answers = typing.get_args(alias)
    return bool(takes) and answers in (None, type(None))


def hands_over(annotation: str, module: ModuleType) -> bool:
    """Whether a parameter's annotation (as written) takes a callback that is handed values
    and returns nothing: spelled `Callable[[X], None]`, or a name the module binds to one
    (`Emit` included)."""
    for node in ast.walk(ast.parse(annotation, mode="eval")):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Callable"):
            spec = node.slice
            if (
                isinstance(spec, ast.Tuple)
                and isinstance(spec.elts[0], ast.List)
                and spec.elts[0].elts
                and ast.unparse(spec.elts[-1]) == "None"
            ):
                return True
        if isinstance(node, ast.Name) and is_none_callback(getattr(module, node.id, None)):
            return True
    return False


def second_ways(module: ModuleType) -> list[str]:
    found = []
    for name, fn in public_callables(module):
        where = f"{module.__name__}.{name}"
        returns = str(inspect.signature(fn).return_annotation)
        if (
            inspect.isasyncgenfunction(fn)
            or "AsyncIterator" in returns
            or "AsyncGenerator" in returns
        ):
            found.append(f"{where} returns a stream of events")
        for param in inspect.signature(fn).parameters.values():
            annotation = param.annotation
            if annotation is inspect.Parameter.empty or not isinstance(annotation, str):
                continue
            if not hands_over(annotation, module):
                continue
            if param.name != "emit" or not annotation.startswith("Emit["):
                found.append(f"{where}({param.name}: {annotation}) is a callback besides emit")
    return found


def test_every_op_hands_its_events_to_one_emit() -> None:
    modules = list(ops_modules())
    assert len(modules) > 20  # every operation is read, not an empty package
    found = [problem for module in modules for problem in second_ways(module)]
    assert found == []


def test_the_rule_sees_a_second_way() -> None:
    """The check above finds each way it forbids (it would pass on nothing otherwise)."""
    fake = ModuleType("spark_tui.ops.fake")
    source = """
from __future__ import annotations
from collections.abc import AsyncIterator, Callable
from spark_tui.ops.events import Emit, Notice

Sink = Callable[[Notice], None]

async def progress_callback(progress: Callable[[int], None]) -> None: ...
async def aliased_sink(out: Sink) -> None: ...
async def emit_untyped(emit: Callable[[Notice], None]) -> None: ...
async def stream() -> AsyncIterator[Notice]:
    yield Notice("info", "x")
def iterator() -> AsyncIterator[Notice]: ...
class Op:
    def __init__(self, on_level: Callable[[int], None] | None = None) -> None: ...
    async def run(self, emit: Emit[Notice]) -> int: ...
async def fine(emit: Emit[Notice] | None = None) -> list[Notice]: ...
def trigger(give_up: Callable[[], None]) -> None: ...
"""
    exec(compile(source, "fake.py", "exec"), fake.__dict__)
    for value in vars(fake).values():
        if inspect.isfunction(value) or inspect.isclass(value):
            value.__module__ = fake.__name__
    assert sorted(second_ways(fake)) == sorted(
        [
            "spark_tui.ops.fake.progress_callback(progress: Callable[[int], None]) is a "
            "callback besides emit",
            "spark_tui.ops.fake.aliased_sink(out: Sink) is a callback besides emit",
            "spark_tui.ops.fake.emit_untyped(emit: Callable[[Notice], None]) is a callback "
            "besides emit",
            "spark_tui.ops.fake.stream returns a stream of events",
            "spark_tui.ops.fake.iterator returns a stream of events",
            "spark_tui.ops.fake.Op.__init__(on_level: Callable[[int], None] | None) is a "
            "callback besides emit",
        ]
    )
    assert is_none_callback(Emit)

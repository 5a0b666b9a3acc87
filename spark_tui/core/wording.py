"""How counts and settings are written in the text users read (plans, fit reports)."""

from __future__ import annotations

from typing import Any


def plural(n: int, noun: str) -> str:
    """`1 rank`, `2 ranks`: the count with its noun in the right number."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def setting_text(key: str, value: Any) -> str:
    """A setting as a user would type it: `max_num_seqs=8`, `tool_call_parser=none`
    (None is a removed setting), booleans as true/false."""
    if value is None:
        return f"{key}=none"
    if isinstance(value, bool):
        return f"{key}={'true' if value else 'false'}"
    return f"{key}={value}"


def change_text(key: str, old: Any, new: Any) -> str:
    """One setting change as users read it: `tool_call_parser: glm47 -> none`."""
    return f"{key}: {_value(old)} -> {_value(new)}"


def _value(value: Any) -> str:
    return setting_text("", value)[1:]


def depth_label(tokens: int) -> str:
    """A context depth in tokens: 4096 -> `4k`, 0 -> `0`."""
    return f"{tokens // 1024}k" if tokens and tokens % 1024 == 0 else str(tokens)

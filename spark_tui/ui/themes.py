"""Cockpit themes from YAML files: bundled `themes/` and the user's config dir `themes/`."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from textual.theme import Theme

from spark_tui.core.errors import InputError
from spark_tui.ui.paths import bundled_dir, user_config_dir

DEFAULT_THEME = "spark-dark"
NO_COLOR_THEME = "spark-ansi"
_THEME_FIELDS = {f.name for f in fields(Theme)}

# One line of a plain theme file: `key: value` (a block's key when the value is missing),
# maybe indented, maybe with a comment after it. The value is a quoted string with no escape
# or a single word starting with a letter (`spark-dark`, `true`).
_PLAIN_LINE = re.compile(
    r"(?P<indent> *)(?P<key>[A-Za-z][\w-]*):"
    r"(?: +(?P<value>\"[^\"\\]*\"|'[^']*'|[A-Za-z][\w-]*))?(?: +#.*)? *"
)
# Words YAML reads as something other than a string (PyYAML's YAML 1.1 booleans and nulls,
# in any case): only `true` and `false` are taken here, the rest are YAML's to read.
_YAML_WORDS = {"yes", "no", "on", "off", "true", "false", "null"}
_BOOLEANS = {"true": True, "false": False}
_UNREAD = object()  # a value left to YAML


def plain_theme(text: str) -> dict[str, Any] | None:
    """The mapping in a theme file written as the bundled ones are (`key: value` lines, one
    level of blocks under a key; comments), exactly as YAML reads it; None for anything else
    (YAML then reads it). PyYAML's import would cost the first frame a twentieth of a
    minimal Textual app's whole start, for three small files."""
    data: dict[str, Any] = {}
    block: str | None = None  # the key whose indented lines follow
    indent = ""
    for line in text.splitlines():
        if not line.strip() or line.lstrip(" ").startswith("#"):
            continue
        match = _PLAIN_LINE.fullmatch(line)
        if match is None:
            return None
        key, value = match["key"], _plain_value(match["value"])
        if key.lower() in _YAML_WORDS or value is _UNREAD:
            return None
        if not match["indent"]:
            data[key], block, indent = value, (key if match["value"] is None else None), ""
            continue
        if block is None or match["value"] is None or indent not in ("", match["indent"]):
            return None
        indent = match["indent"]
        if data[block] is None:
            data[block] = {}
        data[block][key] = value
    return data or None


def _plain_value(text: str | None) -> object:
    if text is None:
        return None  # a block's key, or YAML's null when no lines follow it
    if text[0] in "\"'":
        return text[1:-1]
    if text.lower() in _YAML_WORDS:
        return _BOOLEANS.get(text, _UNREAD)
    return text


def theme_from_yaml(text: str, source: str) -> Theme:
    """Build a Textual theme from one YAML file's text."""
    data = plain_theme(text)
    if data is None:
        data = _read_yaml(text, source)
    if not isinstance(data, dict) or not data.get("name") or not data.get("primary"):
        raise InputError(
            f"{source}: a theme needs `name` and `primary`", "see themes/spark-dark.yaml"
        )
    unknown = set(data) - _THEME_FIELDS
    if unknown:
        raise InputError(
            f"{source}: unknown theme keys {sorted(unknown)}",
            f"use only {sorted(_THEME_FIELDS)}",
        )
    data["variables"] = {str(k): str(v) for k, v in (data.get("variables") or {}).items()}
    return Theme(**data)


def _read_yaml(text: str, source: str) -> Any:
    import yaml  # only for a theme not written in the plain form

    try:
        # The C loader when PyYAML has it.
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not valid YAML ({exc})", "fix the theme file") from exc


def load_themes(extra_dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """Every theme found (bundled first, user themes override by name) and the problems met."""
    found: dict[str, Theme] = {}
    problems: list[str] = []
    for folder in [bundled_dir("themes"), user_config_dir() / "themes", *(extra_dirs or [])]:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.y*ml")):
            try:
                theme = theme_from_yaml(path.read_text(encoding="utf-8"), str(path))
            except (InputError, OSError, TypeError) as exc:
                problems.append(str(exc))
                continue
            found[theme.name] = theme
    return list(found.values()), problems

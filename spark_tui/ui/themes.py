"""Cockpit themes: the bundled ones (spark_tui.ui.bundled_themes) and the user's, YAML files
of Textual theme fields in the config dir's `themes/` (read with PyYAML, which only a user's
theme makes the cockpit import before its first frame)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from textual.theme import Theme

from spark_tui.core.errors import InputError
from spark_tui.ui.bundled_themes import BUNDLED_THEMES
from spark_tui.ui.paths import user_config_dir

DEFAULT_THEME = "spark-dark"
NO_COLOR_THEME = "spark-ansi"
_THEME_FIELDS = {f.name for f in fields(Theme)}


def theme_from_yaml(text: str, source: str) -> Theme:
    """Build a Textual theme from one YAML file's text."""
    data = _read_yaml(text, source)
    if not isinstance(data, dict) or not data.get("name") or not data.get("primary"):
        raise InputError(
            f"{source}: a theme needs `name` and `primary`",
            "add them; the other keys are Textual's Theme fields (the bundled themes in "
            "spark_tui/ui/bundled_themes.py use most of them)",
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
    import yaml  # only when the user has themes of their own

    try:
        # The C loader when PyYAML has it.
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not valid YAML ({exc})", "fix the theme file") from exc


def load_themes(extra_dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """Every theme found (bundled first, user themes override by name) and the problems met."""
    found: dict[str, Theme] = {theme.name: theme for theme in BUNDLED_THEMES}
    problems: list[str] = []
    for folder in [user_config_dir() / "themes", *(extra_dirs or [])]:
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

"""Themes: the bundled ones need no file (nor PyYAML); a user's theme file is read with YAML,
overrides a bundled theme of the same name, and a broken one is named with a remedy."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui.core.errors import InputError
from spark_tui.ui.bundled_themes import BUNDLED_THEMES
from spark_tui.ui.themes import DEFAULT_THEME, NO_COLOR_THEME, load_themes, theme_from_yaml


def test_the_bundled_themes_are_there_without_any_file(tmp_path: Path) -> None:
    themes, problems = load_themes([tmp_path / "none"])
    names = [t.name for t in themes]
    assert names == ["spark-dark", "spark-light", "spark-ansi"] and problems == []
    assert {DEFAULT_THEME, NO_COLOR_THEME} <= set(names)
    ansi = next(t for t in themes if t.name == NO_COLOR_THEME)
    # Only the terminal's palette: every colour it names is an ANSI one.
    assert ansi.ansi and all(
        v.startswith("ansi_") or v == "none" for v in [ansi.primary, *ansi.variables.values()]
    )


def test_a_user_theme_overrides_the_bundled_one_of_its_name(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "# my colours\nname: spark-dark\nprimary: '#FF0000'\ndark: yes\n"
        "variables: {border: '#333333'}\n"
    )
    (tmp_path / "flow.yml").write_text("name: flow\nprimary: ansi_red\n")
    themes, problems = load_themes([tmp_path])
    by_name = {t.name: t for t in themes}
    assert problems == []
    assert by_name["spark-dark"].primary == "#FF0000" and by_name["spark-dark"].dark is True
    assert by_name["spark-dark"].variables == {"border": "#333333"}
    assert by_name["flow"].primary == "ansi_red"
    assert by_name["spark-light"] == next(t for t in BUNDLED_THEMES if t.name == "spark-light")


def test_a_broken_theme_is_a_problem_named_with_its_file(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("name: a\nvariables: {a: [\n")
    (tmp_path / "bare.yaml").write_text("name: a\nvariables:\n")
    (tmp_path / "odd.yaml").write_text("name: a\nprimary: b\ncolour: c\n")
    themes, problems = load_themes([tmp_path])
    assert [t.name for t in themes] == ["spark-dark", "spark-light", "spark-ansi"]
    assert len(problems) == 3
    said = "\n".join(problems)
    assert f"{tmp_path / 'bare.yaml'}: a theme needs `name` and `primary`" in said
    assert f"{tmp_path / 'broken.yaml'}: not valid YAML" in said
    assert f"{tmp_path / 'odd.yaml'}: unknown theme keys ['colour']" in said


def test_theme_errors_carry_a_remedy() -> None:
    with pytest.raises(InputError) as broken:
        theme_from_yaml("name: a\nvariables: {a: [\n", "broken.yaml")
    assert broken.value.remedy == "fix the theme file"
    with pytest.raises(InputError) as bare:
        theme_from_yaml("name: a\n", "bare.yaml")
    assert "Textual's Theme fields" in bare.value.remedy

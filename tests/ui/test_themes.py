"""Theme files: the plain form the bundled themes use is read without PyYAML, exactly as YAML
reads it; anything else still goes to YAML (and its errors to the user with a remedy)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from spark_tui.core.errors import InputError
from spark_tui.ui.paths import bundled_dir
from spark_tui.ui.themes import plain_theme, theme_from_yaml

BUNDLED = sorted(bundled_dir("themes").glob("*.yaml"))

# Read here as YAML reads them.
PLAIN = [
    'name: a\nprimary: "#123456"\n',
    "name: a   # a comment\nprimary: 'ansi_red'  \n",
    "# heading\n\nname: a\ndark: false\nansi: true\nprimary: ansi_red\n",
    'name: a\nprimary: "x # not a comment"\nvariables:\n    one: "1"\n    two: two # c\n',
    "name: a\nvariables:\nprimary: b\n",  # an empty block is null
    "name: a\nvariables:\n  a: b\nsurface: c\nboost:\n   d: e\n",
    "name: a\nname: b\nprimary: c\n",  # the last one wins, in YAML too
    "name: a\r\nprimary: b\r\n",
    "name: true-ish\nprimary: nothing\n",
]
# Left to YAML: forms where a plain reading could differ from YAML's.
TO_YAML = [
    "name: yes\nprimary: b\n",
    "name: a\ndark: True\n",
    "name: a\nprimary: null\n",
    "on: a\n",
    'name: "a\\tb"\n',
    "name: 'it''s'\n",
    "name: 12\n",
    "name: .inf\n",
    "name: 2024-01-01\n",
    "name: a\nvariables: {a: b}\n",
    "name: a\nvariables:\n  a:\n    b: c\n",
    "name: a\nvariables:\n  a: b\n    c: d\n",
    "name: a\n  b: c\n",
    "name: a\nprimary: b\n  c\n",
    "- a\n",
    "---\nname: a\n",
    "name:\ta\n",
    "name:a\n",
    '"name": a\n',
    "\ufeffname: a\n",
    "name: a b\n",
    "",
    "# only a comment\n",
]


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_each_bundled_theme_is_read_plainly_as_yaml_reads_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert plain_theme(text) == yaml.safe_load(text)
    assert plain_theme(text) is not None


def test_there_are_bundled_themes() -> None:
    assert len(BUNDLED) >= 3


@pytest.mark.parametrize("text", PLAIN)
def test_plain_forms_read_as_yaml_reads_them(text: str) -> None:
    data = plain_theme(text)
    assert data is not None and data == yaml.safe_load(text)


@pytest.mark.parametrize("text", TO_YAML)
def test_other_forms_are_left_to_yaml(text: str) -> None:
    assert plain_theme(text) is None


def test_a_theme_plain_reading_leaves_is_still_read_by_yaml() -> None:
    theme = theme_from_yaml(
        'name: flow\nprimary: "#76B900"\ndark: yes\nvariables: {border: "#333333"}\n', "flow"
    )
    assert (theme.name, theme.primary, theme.dark) == ("flow", "#76B900", True)
    assert theme.variables == {"border": "#333333"}


def test_a_broken_theme_names_the_file_and_the_remedy() -> None:
    with pytest.raises(InputError) as raised:
        theme_from_yaml("name: a\nvariables: {a: [\n", "broken.yaml")
    assert "broken.yaml: not valid YAML" in raised.value.message
    assert raised.value.remedy == "fix the theme file"


def test_a_plain_theme_without_primary_is_refused() -> None:
    with pytest.raises(InputError, match="needs `name` and `primary`"):
        theme_from_yaml("name: a\nvariables:\n", "no-primary.yaml")

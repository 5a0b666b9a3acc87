"""Git registries named in spark-tui's config: cloned on first use, pulled with `--update`,
against local git repositories this test makes (no remote is reachable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from spark_tui.core import registry
from spark_tui.core.recipe_loader import bundled_recipes_dir, find_recipe
from spark_tui.ops.registries import sync

RECIPE = (bundled_recipes_dir() / "gpt-oss-120b.yaml").read_text()
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, env={**os.environ, **GIT_ENV}
    )


def make_repo(path: Path) -> Path:
    (path / "recipes" / "family").mkdir(parents=True)
    (path / "recipes" / "family" / "first.yaml").write_text(RECIPE + "mods:\n  - mods/tmpl\n")
    (path / "mods" / "tmpl").mkdir(parents=True)
    (path / "mods" / "tmpl" / "run.sh").write_text("#!/bin/sh\necho tmpl\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "first")
    return path


def write_config(entries: list[dict[str, str]]) -> None:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"registries": entries}))


def recipes(*args: str) -> tuple[list[dict[str, object]], str]:
    res = subprocess.run(
        [sys.executable, "-m", "spark_tui", "recipes", "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), res.stderr


def test_cloned_on_first_use_and_pulled_with_update(tmp_path: Path) -> None:
    src = make_repo(tmp_path / "remote")
    write_config([{"name": "lab", "url": f"file://{src}"}])
    rows, err = recipes()
    assert "registry lab cloned" in err
    first = next(r for r in rows if r["name"] == "first")
    assert first["origin"] == "registry:lab" and first["source"] == "registry"
    clone = Path(os.environ["XDG_CACHE_HOME"]) / "spark-tui" / "registries" / "lab"
    assert first["path"] == str(clone / "recipes" / "family" / "first.yaml")
    # Its mod comes from its own registry's mods folder, not dropped.
    recipe = find_recipe("first")
    assert recipe.missing == [] and recipe.prelaunch[0].source == str(clone / "mods" / "tmpl")

    (src / "recipes" / "second.yaml").write_text(RECIPE)
    git(src, "add", ".")
    git(src, "commit", "-q", "-m", "second")
    rows, _ = recipes()
    assert "second" not in {r["name"] for r in rows}  # listing alone does not pull
    rows, err = recipes("--update")
    assert "registry lab updated" in err
    assert next(r for r in rows if r["name"] == "second")["origin"] == "registry:lab"


def test_config_order_settles_a_clash_and_a_ref_is_honoured(tmp_path: Path) -> None:
    a = make_repo(tmp_path / "a")
    b = make_repo(tmp_path / "b")
    git(b, "checkout", "-q", "-b", "stable")
    (b / "recipes" / "only-on-stable.yaml").write_text(RECIPE)
    git(b, "add", ".")
    git(b, "commit", "-q", "-m", "stable")
    write_config(
        [
            {"name": "second", "url": f"file://{b}", "ref": "stable"},
            {"name": "first", "url": f"file://{a}"},
        ]
    )
    results = sync(registry.configured_registries())
    assert [(r.name, r.action) for r in results] == [("second", "cloned"), ("first", "cloned")]
    assert find_recipe("first").registry == "second"  # config order, not alphabetical
    assert find_recipe("only-on-stable").registry == "second"
    assert find_recipe("@first/first").registry == "first"


def test_an_unreachable_registry_is_reported_and_the_others_still_listed(tmp_path: Path) -> None:
    good = make_repo(tmp_path / "good")
    write_config(
        [
            {"name": "gone", "url": f"file://{tmp_path / 'does-not-exist'}"},
            {"name": "good", "url": f"file://{good}"},
        ]
    )
    rows, err = recipes()
    assert "registry gone: git clone failed" in err
    assert "check the registry's `url`" in err
    assert {"first", "gpt-oss-120b"} <= {str(r["name"]) for r in rows}
    gone = Path(os.environ["XDG_CACHE_HOME"]) / "spark-tui" / "registries" / "gone"
    assert not gone.exists() and not gone.with_name("gone.partial").exists()

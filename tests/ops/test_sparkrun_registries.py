"""sparkrun's own setup as a sparkrun user has it: its registries.yaml and the git clones it
keeps of the eugr and Spark Arena registries (local git repositories this test makes), with
eugr's node-count sub-folders and Spark Arena's hidden experimental registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spark_tui.core.errors import RecipeError
from spark_tui.core.recipe import require_vllm
from spark_tui.core.recipe_loader import bundled_recipes_dir, find_recipe

BASE = yaml.safe_load((bundled_recipes_dir() / "gpt-oss-120b.yaml").read_text())
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
SGLANG = {
    "recipe_version": "2",
    "model": "Qwen/Qwen3-8B",
    "runtime": "sglang",
    "container": "lmsysorg/sglang:spark",
    "command": "python3 -m sglang.launch_server --model-path {model} --port 8000",
}


def recipe(**extra: object) -> str:
    return yaml.safe_dump({**BASE, **extra}, sort_keys=False)


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, env={**os.environ, **GIT_ENV}
    )


def repo(path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "recipes")
    return path


@pytest.fixture
def sparkrun_setup(tmp_path: Path) -> Path:
    """eugr's and Spark Arena's registries, cloned where sparkrun clones them, and listed
    in sparkrun's registries.yaml as sparkrun writes it (experimental hidden)."""
    eugr = repo(
        tmp_path / "spark-vllm-docker",
        {
            "recipes/qwen-big.yaml": recipe(),
            "recipes/3x-spark-cluster/qwen-big.yaml": recipe(min_nodes=3, max_nodes=3),
            "recipes/4x-spark-cluster/qwen-big.yaml": recipe(min_nodes=4, max_nodes=4),
            "recipes/4x-spark-cluster/only-nested.yaml": recipe(min_nodes=4, max_nodes=4),
            "recipes/3x-spark-cluster/twin.yaml": recipe(min_nodes=3, max_nodes=3),
            "recipes/qwen3.5-dotted.yaml": recipe(),
            "recipes/3x-spark-cluster/qwen3.5-dotted.yaml": recipe(min_nodes=3, max_nodes=3),
            "recipes/4x-spark-cluster/twin.yaml": recipe(min_nodes=4, max_nodes=4),
            "recipes/sized.yaml": recipe(
                metadata={"model_vram": 25.5, "num_layers": 36, "num_kv_heads": 8, "head_dim": 64}
            ),
            "mods/gpu-mem-util-gb/run.sh": "#!/bin/sh\necho patched\n",
        },
    )
    arena = repo(
        tmp_path / "recipe-registry",
        {
            "official-recipes/arena-sglang.yaml": yaml.safe_dump(SGLANG),
            "experimental-recipes/hidden-sglang.yaml": yaml.safe_dump(SGLANG),
        },
    )
    home = Path(os.environ["SPARK_TUI_SPARKRUN_HOME"])
    clones = home / ".cache" / "sparkrun" / "registries"
    clones.mkdir(parents=True)
    for name, src in (("eugr", eugr), ("official", arena), ("experimental", arena)):
        git(clones, "clone", "-q", f"file://{src}", name)
    listing = {
        "registries": [
            {"name": "official", "url": str(arena), "subpath": "official-recipes"},
            {"name": "eugr", "url": str(eugr), "subpath": "recipes", "mods_subpath": "mods"},
            {
                "name": "experimental",
                "url": str(arena),
                "subpath": "experimental-recipes",
                "visible": False,
            },
        ]
    }
    config = home / ".config" / "sparkrun" / "registries.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump(listing))
    return clones


def rows() -> list[dict[str, object]]:
    res = subprocess.run(
        [sys.executable, "-m", "spark_tui", "recipes", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return list(json.loads(res.stdout))


def test_sub_folder_recipes_take_sparkrun_path_qualified_names(sparkrun_setup: Path) -> None:
    assert find_recipe("qwen-big").min_nodes == 1  # the flat one, as sparkrun finds it
    assert find_recipe("@eugr/3x-spark-cluster/qwen-big").min_nodes == 3
    assert find_recipe("4x-spark-cluster/qwen-big").min_nodes == 4
    nested = find_recipe("only-nested")  # no other of its name: the name reaches it
    assert nested.listed_name == "only-nested" and nested.registry == "eugr"
    assert find_recipe("twin").min_nodes == 3  # the first of its name (sorted), as sparkrun
    twin = find_recipe("@eugr/4x-spark-cluster/twin")
    assert (twin.min_nodes, twin.listed_name) == (4, "4x-spark-cluster/twin")
    with pytest.raises(RecipeError):
        find_recipe("@eugr/8x-spark-cluster/qwen-big")
    # A dot in the name is not a file suffix (eugr's `qwen3.5-...`).
    assert find_recipe("@eugr/3x-spark-cluster/qwen3.5-dotted").min_nodes == 3
    assert find_recipe("3x-spark-cluster/qwen3.5-dotted.yaml").min_nodes == 3
    listed = {(r["ref"], r["shadowed"]) for r in rows() if r["name"] in ("qwen-big", "twin")}
    assert listed == {
        ("qwen-big", False),
        ("3x-spark-cluster/qwen-big", False),
        ("4x-spark-cluster/qwen-big", False),
        ("twin", False),
        ("4x-spark-cluster/twin", False),
    }


def test_only_what_is_really_hidden_is_marked_shadowed(sparkrun_setup: Path) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui" / "recipes"
    user.mkdir(parents=True)
    (user / "qwen-big.yaml").write_text(recipe())
    marked = {(r["origin"], r["ref"], r["shadowed"]) for r in rows() if r["name"] == "qwen-big"}
    assert marked == {
        ("user", "qwen-big", False),
        ("sparkrun:eugr", "qwen-big", True),  # the user's recipe of that name wins
        ("sparkrun:eugr", "3x-spark-cluster/qwen-big", False),
        ("sparkrun:eugr", "4x-spark-cluster/qwen-big", False),
    }


def test_a_remedy_names_the_recipe_as_sparkrun_takes_it(sparkrun_setup: Path) -> None:
    for name, expected in (
        ("hidden-sglang", "`sparkrun run @experimental/hidden-sglang`"),
        ("arena-sglang", "`sparkrun run arena-sglang`"),
    ):
        with pytest.raises(RecipeError) as exc:
            require_vllm(find_recipe(name))
        assert expected in exc.value.remedy


def test_the_listing_counts_the_facts_sparkruns_metadata_names_give(sparkrun_setup: Path) -> None:
    sized = next(r for r in rows() if r["name"] == "sized")
    missing = set(sized["facts_missing"])  # type: ignore[arg-type]
    assert not missing & {"weight_bytes", "num_hidden_layers", "num_key_value_heads", "head_dim"}
    assert "num_attention_heads" in missing  # sparkrun's metadata has no such key

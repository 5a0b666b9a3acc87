"""Recipes from registries: sparkrun's clones and the git registries of spark-tui's config,
the clash order, and mods / pre_exec resolved as sparkrun resolves them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spark_tui.core import registry
from spark_tui.core.errors import InputError, RecipeError
from spark_tui.core.fit import check_fit
from spark_tui.core.model_facts import resolve_model_facts
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.recipe_loader import bundled_recipes_dir, find_recipe, list_recipes
from spark_tui.core.render import render_argv, render_env

BASE = yaml.safe_load((bundled_recipes_dir() / "gpt-oss-120b.yaml").read_text())


def recipe_text(**extra: object) -> str:
    data = dict(BASE)
    data.update(extra)
    return yaml.safe_dump(data, sort_keys=False)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def mod(folder: Path, body: str = "echo mod ran\n") -> Path:
    write(folder / "run.sh", "#!/bin/sh\n" + body)
    return folder


def sparkrun_home() -> Path:
    return Path(os.environ["SPARK_TUI_SPARKRUN_HOME"])


def sparkrun_clone(name: str) -> Path:
    return sparkrun_home() / ".cache" / "sparkrun" / "registries" / name


def user_dir() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui" / "recipes"


def spark_tui_clone(name: str) -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "spark-tui" / "registries" / name


def write_config(registries: list[dict[str, object]]) -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui" / "config.yaml"
    return write(path, yaml.safe_dump({"registries": registries}))


# --- sources and clash order --------------------------------------------------------------


def test_sparkrun_clones_are_read_recursively_with_their_registry_named() -> None:
    write(sparkrun_clone("eugr") / "recipes" / "qwen" / "qwen-modded.yaml", recipe_text())
    write(sparkrun_clone("official") / "official-recipes" / "flat.yml", recipe_text())
    # Hidden folders (a registry's .git, .sparkrun) hold no recipes.
    write(sparkrun_clone("eugr") / "recipes" / ".git" / "junk.yaml", recipe_text())
    found = {r.name: r for r in list_recipes()}
    assert found["qwen-modded"].origin == "sparkrun:eugr"
    assert found["qwen-modded"].source == "sparkrun"
    assert found["flat"].origin == "sparkrun:official"
    assert "junk" not in found
    assert find_recipe("@official/flat").registry == "official"


def test_sparkrun_registries_yaml_gives_order_subpaths_and_disabled() -> None:
    cfg = sparkrun_home() / ".config" / "sparkrun" / "registries.yaml"
    write(
        cfg,
        yaml.safe_dump(
            {
                "registries": [
                    {"name": "mine", "url": "u", "subpath": "deep/recipes", "mods_subpath": "m"},
                    {"name": "eugr", "url": "u", "subpath": "recipes"},
                    {"name": "off", "url": "u", "subpath": "recipes", "enabled": False},
                    {"name": "notcloned", "url": "u", "subpath": "recipes"},
                ]
            }
        ),
    )
    write(sparkrun_clone("mine") / "deep" / "recipes" / "same.yaml", recipe_text())
    write(sparkrun_clone("eugr") / "recipes" / "same.yaml", recipe_text())
    write(sparkrun_clone("off") / "recipes" / "offrecipe.yaml", recipe_text())
    regs = registry.sparkrun_registries()
    assert [r.name for r in regs] == ["mine", "eugr"]
    # A legacy eugr entry without mods_subpath still has its mods folder (as sparkrun does).
    assert regs[1].mods_dir == sparkrun_clone("eugr") / "mods"
    assert regs[0].mods_dir == sparkrun_clone("mine") / "m"
    assert find_recipe("same").registry == "mine"  # registries.yaml order
    names = [r.name for r in list_recipes()]
    assert "offrecipe" not in names


def test_clash_order_user_then_config_registry_then_sparkrun_then_bundled() -> None:
    name = "gpt-oss-120b"  # a bundled name
    write(sparkrun_clone("eugr") / "recipes" / f"{name}.yaml", recipe_text())
    assert find_recipe(name).origin == "sparkrun:eugr"
    write_config([{"name": "lab", "url": "/nowhere"}])
    write(spark_tui_clone("lab") / "recipes" / f"{name}.yaml", recipe_text())
    assert find_recipe(name).origin == "registry:lab"
    write(user_dir() / f"{name}.yaml", recipe_text())
    assert find_recipe(name).origin == "user"
    same = [r for r in list_recipes() if r.name == name]
    assert [r.origin for r in same] == ["user", "registry:lab", "sparkrun:eugr", "bundled"]
    hidden = registry.shadowed(list_recipes())
    assert {o for n, o in hidden if n == name} == {"registry:lab", "sparkrun:eugr", "bundled"}
    # An explicit registry still picks its own.
    assert find_recipe(f"@eugr/{name}").origin == "sparkrun:eugr"


def test_unknown_registry_and_unsafe_config_entries_are_input_errors() -> None:
    with pytest.raises(RecipeError, match="no registry named 'nope'"):
        find_recipe("@nope/x")
    write_config([{"name": "../escape", "url": "u"}])
    with pytest.raises(InputError, match="not usable as a folder name"):
        registry.configured_registries()
    write_config([{"name": "ok", "url": "u", "subpath": "../../etc"}])
    with pytest.raises(InputError, match="leaves the registry's folder"):
        registry.configured_registries()
    write_config([{"name": "ok", "url": "--upload-pack=evil"}])
    with pytest.raises(InputError, match="may not start with '-'"):
        registry.configured_registries()


def test_a_non_vllm_runtime_is_refused_with_that_reason() -> None:
    sglang = recipe_text(runtime="sglang", command="sglang serve --model-path {model}")
    path = write(user_dir() / "sg.yaml", sglang)
    recipe = find_recipe(str(path))
    with pytest.raises(RecipeError) as info:
        render_argv(recipe, apply_overrides(recipe, []))
    assert "runtime is 'sglang', not vLLM" in info.value.message
    assert "vllm serve" not in info.value.remedy  # not a hint to rewrite its command


# --- mods -----------------------------------------------------------------------------------


def test_mod_resolution_order_next_to_recipe_then_registry_then_eugr() -> None:
    reg = sparkrun_clone("myreg")  # a clone sparkrun did not ship: recipes/ and mods/
    path = write(reg / "recipes" / "fam" / "r.yaml", recipe_text(mods=["mods/fix"]))
    mod(sparkrun_clone("eugr") / "mods" / "fix", "echo eugr\n")
    assert find_recipe("r").prelaunch[0].source == str(sparkrun_clone("eugr") / "mods" / "fix")
    mod(reg / "mods" / "fix", "echo own\n")  # the recipe's registry beats eugr
    assert find_recipe("r").prelaunch[0].source == str(reg / "mods" / "fix")
    mod(path.parent / "mods" / "fix")  # next to the recipe: <dir>/mods/<ref>
    assert find_recipe("r").prelaunch[0].source == str(path.parent / "mods" / "fix")
    mod(path.parent / "fix")  # next to the recipe: <dir>/<ref> comes first
    recipe = find_recipe("r")
    copy, run = recipe.prelaunch
    assert copy.kind == "copy" and copy.source == str(path.parent / "fix")
    assert copy.dest == "/workspace/mods/fix" and copy.mod == "fix"
    assert run.command == (
        "export WORKSPACE_DIR=$PWD && cd /workspace/mods/fix && chmod +x run.sh && ./run.sh"
    )
    # `fix` and `mods/fix` are the same mod; a folder without run.sh is not a mod.
    write(path, recipe_text(mods=["fix"]))
    assert find_recipe("r").prelaunch == recipe.prelaunch
    (path.parent / "fix" / "run.sh").unlink()
    assert find_recipe("r").prelaunch[0].source == str(path.parent / "mods" / "fix")


def test_the_experimental_registry_serves_its_own_mods_as_sparkrun_ships_it() -> None:
    # sparkrun 0.4.2 ships `experimental` with `mods_subpath: experimental-mods`; a clone
    # found without a registries.yaml, or an entry that leaves the subpath out, gets it.
    reg = sparkrun_clone("experimental")
    write(reg / "experimental-recipes" / "fam" / "x.yaml", recipe_text(mods=["mods/fix"]))
    mod(sparkrun_clone("eugr") / "mods" / "fix", "echo eugr\n")
    mod(reg / "experimental-mods" / "fix", "echo own\n")
    own = str(reg / "experimental-mods" / "fix")
    assert find_recipe("@experimental/x").prelaunch[0].source == own
    cfg = sparkrun_home() / ".config" / "sparkrun" / "registries.yaml"
    entry = {"name": "experimental", "subpath": "experimental-recipes", "visible": False}
    write(cfg, yaml.safe_dump({"registries": [entry, {"name": "eugr"}]}))
    assert find_recipe("@experimental/x").prelaunch[0].source == own


def test_a_missing_mod_names_every_place_and_blocks_check_and_plan(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", recipe_text(mods=["mods/ghost", "@eugr/ghost2"]))
    recipe = find_recipe(str(path))
    assert [m.ref for m in recipe.missing] == ["mods/ghost", "@eugr/ghost2"]
    assert recipe.missing[0].tried == (
        str(tmp_path / "ghost"),
        str(tmp_path / "mods" / "ghost"),
        "@eugr (no such registry on this machine)",
    )
    argv = render_argv(recipe, apply_overrides(recipe, []))
    nodes = [_node()]
    report = check_fit(recipe, argv, render_env(recipe), nodes, resolve_model_facts(recipe, nodes))
    blocking = [f for f in report.findings if f.code == "mod_not_found"]
    assert len(blocking) == 2 and all(f.severity == "error" for f in blocking)
    assert str(tmp_path / "mods" / "ghost") in blocking[0].message
    assert report.verdict not in ("fits", "fits_with_warnings")
    from spark_tui.core.plan import build_plan

    with pytest.raises(RecipeError, match="mod 'mods/ghost' was not found"):
        build_plan(recipe, apply_overrides(recipe, []), nodes)


def test_v1_mods_under_runtime_config_and_pre_exec_entries(tmp_path: Path) -> None:
    mod(tmp_path / "mods" / "old")
    write(tmp_path / "extra" / "a.txt", "x")
    text = recipe_text(
        recipe_version="1",
        runtime_config={"mods": ["old"]},
        pre_exec=["echo before", {"copy": "extra", "dest": "/opt/extra"}],
    )
    recipe = find_recipe(str(write(tmp_path / "v1.yaml", text)))
    kinds = [(s.kind, s.mod) for s in recipe.prelaunch]
    # The recipe's own pre_exec first, then each mod's copy and exec (sparkrun's order).
    assert kinds == [("exec", None), ("copy", None), ("copy", "old"), ("exec", "old")]
    assert recipe.prelaunch[1].source == str(tmp_path / "extra")
    assert recipe.prelaunch[1].dest == "/opt/extra"
    bad = recipe_text(pre_exec=[{"copy": "nothere", "dest": "/x"}])
    missing = find_recipe(str(write(tmp_path / "bad.yaml", bad))).missing
    assert missing[0].kind == "pre_exec copy" and missing[0].tried == (str(tmp_path / "nothere"),)
    with pytest.raises(RecipeError, match="neither a command nor a copy"):
        find_recipe(str(write(tmp_path / "worse.yaml", recipe_text(pre_exec=[{"x": 1}]))))


def test_recipes_json_shows_where_each_recipe_comes_from() -> None:
    write(sparkrun_clone("eugr") / "recipes" / "gpt-oss-120b.yaml", recipe_text(mods=["m"]))
    mod(sparkrun_clone("eugr") / "mods" / "m")
    out = subprocess.run(
        [sys.executable, "-m", "spark_tui", "recipes", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = [r for r in json.loads(out.stdout) if r["name"] == "gpt-oss-120b"]
    assert [(r["origin"], r["shadowed"]) for r in rows] == [
        ("sparkrun:eugr", False),
        ("bundled", True),
    ]
    assert rows[0]["registry"] == "eugr" and rows[0]["mods"] == ["m"]
    assert rows[0]["mods_missing"] == [] and rows[0]["refused"] is None
    table = subprocess.run(
        [sys.executable, "-m", "spark_tui", "recipes"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "sparkrun:eugr" in table and "bundled (shadowed)" in table


def _node():  # type: ignore[no-untyped-def]
    from spark_tui.core.facts import NodeFacts

    path = Path(__file__).resolve().parents[1] / "fixtures" / "simulated_facts_glm53_2x128.json"
    return NodeFacts.from_dict(json.loads(path.read_text())["nodes"][0])


def test_check_and_plan_cli_name_the_missing_mod_and_where_they_looked(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", recipe_text(mods=["mods/ghost"]))
    facts = Path(__file__).resolve().parents[1] / "fixtures" / "simulated_facts_glm53_2x128.json"
    cmd = [sys.executable, "-m", "spark_tui"]
    check = subprocess.run(
        [*cmd, "check", str(path), "--facts", str(facts)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 1
    assert "mod_not_found" in check.stdout and str(tmp_path / "mods" / "ghost") in check.stdout
    plan = subprocess.run(
        [*cmd, "plan", str(path), "--facts", str(facts)], capture_output=True, text=True, timeout=60
    )
    assert plan.returncode == 2 and "mod 'mods/ghost' was not found" in plan.stderr
    assert "remedy" in plan.stderr


def test_a_broken_config_or_sparkrun_file_is_reported_not_fatal_to_a_listing() -> None:
    write(Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui" / "config.yaml", "registries: {a: [")
    write(sparkrun_home() / ".config" / "sparkrun" / "registries.yaml", "registries: [")
    write(sparkrun_clone("eugr") / "recipes" / "still-found.yaml", recipe_text())
    errors: list[RecipeError] = []
    names = {r.name for r in list_recipes(errors=errors)}
    assert {"still-found", "gpt-oss-120b"} <= names
    assert len(errors) == 2 and all(e.remedy for e in errors)
    assert "not valid YAML" in errors[0].message and errors[1].message.startswith("sparkrun's")
    with pytest.raises(InputError, match="not valid YAML"):  # a command names the problem
        find_recipe("gpt-oss-120b")


@pytest.mark.parametrize(
    "command",
    [
        "HF_TOKEN=hf_abcdef huggingface-cli whoami",
        "huggingface-cli login --token hf_abc",
        "x --api-key=sk-1",
    ],
)
def test_a_pre_exec_command_with_a_literal_secret_is_refused(tmp_path: Path, command: str) -> None:
    path = write(tmp_path / "r.yaml", recipe_text(pre_exec=[command]))
    with pytest.raises(RecipeError, match="literal value") as info:
        find_recipe(str(path))
    assert "hf_abc" not in info.value.message + info.value.remedy
    ok = [
        "huggingface-cli login --token $HF_TOKEN",
        'HF_TOKEN="${MY_HF}" true',
        "echo --max-num-batched-tokens 8",
    ]
    assert (
        len(find_recipe(str(write(tmp_path / "ok.yaml", recipe_text(pre_exec=ok)))).prelaunch) == 3
    )

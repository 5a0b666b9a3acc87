"""Parts of the real-vLLM lab that run without root: the recipe it writes, the image config,
the layer writer's rules, and the state-dir cleanup keeping a session's owner mark."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

import yaml

from spark_tui.core.overrides import apply_overrides
from spark_tui.core.recipe_loader import load_recipe_file
from spark_tui.core.render import render_argv
from spark_tui.core.serve_flags import parse_help
from spark_tui.sim.lab import Lab, LabConfig, vllm_image
from spark_tui.sim.lab.config import MARKER

HELP = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32.0-serve-help-all.txt"


def test_the_recipe_uses_only_flags_real_vllm_has(tmp_path: Path) -> None:
    path = vllm_image.write_recipe(tmp_path, 2)
    assert path.name == vllm_image.RECIPE_FILE
    recipe = load_recipe_file(path)
    argv = render_argv(recipe, apply_overrides(recipe, []))
    assert parse_help(HELP.read_text()).check(argv) == []
    data = yaml.safe_load(path.read_text())
    assert data["defaults"]["tensor_parallel"] == 2 and data["env"]["HF_HUB_OFFLINE"] == "1"
    for flag in ("--enforce-eager", "--dtype", "--max-model-len", "--enable-auto-tool-choice"):
        assert flag in argv


def test_the_moe_recipe_differs_from_the_dense_one_only_in_its_model(tmp_path: Path) -> None:
    dense = vllm_image.write_recipe(tmp_path, 2).read_text()
    path = vllm_image.write_recipe(tmp_path, 2, moe=True)
    assert path.name == vllm_image.MOE_RECIPE_FILE
    recipe = load_recipe_file(path)
    argv = render_argv(recipe, apply_overrides(recipe, []))
    assert parse_help(HELP.read_text()).check(argv) == []
    assert recipe.model == vllm_image.MOE_MODEL_REPO
    assert argv[argv.index("--served-model-name") + 1] == "tiny-qwen3-moe"
    changed = [
        (a, b)
        for a, b in zip(dense.splitlines(), path.read_text().splitlines(), strict=True)
        if a != b
    ]
    assert [b.split(":")[0].strip() for _a, b in changed] == [
        "model",
        "description",
        "--served-model-name tiny-qwen3-moe \\",
    ], changed


def test_the_image_runs_torch_eagerly_and_names_its_vllm() -> None:
    cfg = vllm_image.image_config("sha256:" + "0" * 64, Path("/v/venv"))
    env = dict(e.split("=", 1) for e in cfg["config"]["Env"])
    assert env["PATH"].startswith("/v/venv/bin:") and env["TORCHDYNAMO_DISABLE"] == "1"
    assert cfg["config"]["Labels"]["org.spark-tui.vllm-version"] == vllm_image.VLLM_VERSION
    assert cfg["rootfs"]["diff_ids"] == ["sha256:" + "0" * 64]


def test_the_layer_holds_each_path_once_with_its_parents(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "f").write_text("x")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        layer = vllm_image._Layer(tar)
        layer.tree(src / "a", "/opt/deep/a")
        layer.tree(src / "a", "/opt/deep/a")  # again: nothing doubles
        layer.file("/opt/deep/g", b"y")
        layer.symlink("/usr/local/bin/v", "/opt/deep/a/b/f")
    buf.seek(0)
    names = [m.name for m in tarfile.open(fileobj=buf)]
    assert len(names) == len(set(names))
    assert names[:2] == ["opt", "opt/deep"] and "opt/deep/a/b/f" in names
    assert {"usr", "usr/local", "usr/local/bin", "usr/local/bin/v"} <= set(names)


def test_cleaning_an_earlier_lab_keeps_a_sessions_owner_mark() -> None:
    # A short path: the lab refuses state dirs too long for its unix sockets.
    state = Path(tempfile.mkdtemp(prefix="lt", dir="/tmp")) / "s"
    (state / "nodes" / "n1").mkdir(parents=True)
    (state / MARKER).touch()
    (state / "state.json").write_text(json.dumps({"config": {}}))
    (state / "pytest-owner.pid").write_text("4242")
    lab = Lab(LabConfig(state_dir=state))
    kept = lab._foreign_files()
    assert kept == {"pytest-owner.pid": b"4242"}
    shutil.rmtree(state)  # what `down` does to the lab's state dir
    lab._restore(kept)
    assert (state / "pytest-owner.pid").read_text() == "4242" and (state / MARKER).exists()
    assert not (state / "nodes").exists()
    shutil.rmtree(state.parent)

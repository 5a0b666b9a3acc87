"""Recipe loading (sparkrun v1 and v2), runtime resolution, errors, search order, `recipes`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spark_tui import cli
from spark_tui.core.errors import EXIT_USAGE, RecipeError
from spark_tui.core.recipe_loader import (
    bundled_recipes_dir,
    find_recipe,
    list_recipes,
    load_recipe_file,
    parse_recipe,
    user_recipes_dir,
)

REPO = Path(__file__).resolve().parents[2]

V2 = """\
recipe_version: "2"
model: nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4
runtime: vllm
max_nodes: 1
container: ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest
metadata:
  description: Nemotron-3-Nano NVFP4 — single node only
mods:
  - mods/nemotron-nano
defaults:
  port: 8000
  host: 0.0.0.0
  tensor_parallel: 1
  gpu_memory_utilization: 0.7
  max_model_len: 262144
command: |
  vllm serve {model} \\
    --max-model-len {max_model_len} \\
    --host {host} \\
    --port {port} \\
    --gpu-memory-utilization {gpu_memory_utilization}
"""

# An eugr/spark-vllm-docker style v1 recipe: `name`, `build_args`, `cluster_only`, and
# literal braces doubled because v1 commands went through str.format.
V1 = """\
recipe_version: "1"
name: qwen3-coder-next
description: Qwen3 Coder Next on two Sparks
model: Qwen/Qwen3-Coder-Next-FP8
container: vllm-node
cluster_only: true
build_args:
  - --use-wheels
mods: []
defaults:
  port: 8000
  host: 0.0.0.0
  tensor_parallel: 2
  gpu_memory_utilization: 0.85
env:
  VLLM_USE_V2_MODEL_RUNNER: 1
command: |
  vllm serve {model} --host {host} --port {port} \\
    --tensor-parallel-size {tensor_parallel} \\
    --gpu-memory-utilization {gpu_memory_utilization} \\
    --default-chat-template-kwargs '{{"enable_thinking": false}}'
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def error_of(text: str, name: str = "bad", path: str | None = None) -> RecipeError:
    with pytest.raises(RecipeError) as exc:
        parse_recipe(text, name, path=path)
    assert exc.value.exit_code == EXIT_USAGE
    assert exc.value.remedy
    return exc.value


def test_v2_recipe_loads_unchanged() -> None:
    r = parse_recipe(V2, "nemotron", source="bundled", path="/x/nemotron.yaml")
    assert r.name == "nemotron"
    assert r.model == "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
    assert r.runtime == "vllm-distributed" and r.runtime_declared == "vllm"
    assert r.recipe_version == "2"
    assert (r.min_nodes, r.max_nodes) == (1, 1)
    assert r.container == "ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest"
    assert r.description == "Nemotron-3-Nano NVFP4 — single node only"
    assert r.defaults["gpu_memory_utilization"] == 0.7
    assert r.extra == {"mods": ["mods/nemotron-nano"]}
    assert r.source == "bundled" and r.path == "/x/nemotron.yaml"


def test_v1_recipe_loads_and_renders() -> None:
    from spark_tui.core.render import render_argv

    r = parse_recipe(V1, "qwen3-coder-next")
    assert r.recipe_version == "1"
    assert r.runtime == "vllm-distributed" and r.runtime_declared is None
    assert r.description == "Qwen3 Coder Next on two Sparks"
    assert r.min_nodes == 2  # cluster_only
    assert r.env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    assert r.extra["build_args"] == ["--use-wheels"]
    assert r.extra["name"] == "qwen3-coder-next" and r.extra["cluster_only"] is True
    argv = render_argv(r, r.defaults)
    assert argv[-2:] == ["--default-chat-template-kwargs", '{"enable_thinking": false}']
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"


def test_sparkrun_version_key_and_solo_only() -> None:
    r = parse_recipe(
        'sparkrun_version: "1"\nsolo_only: true\nmodel: m\ncommand: vllm serve {model}\n', "s"
    )
    assert r.recipe_version == "1"
    assert (r.min_nodes, r.max_nodes) == (1, 1)


@pytest.mark.parametrize(
    ("snippet", "runtime"),
    [
        ("runtime: vllm\ncommand: vllm serve {model}\n", "vllm-distributed"),
        ("command: vllm serve {model}\n", "vllm-distributed"),
        (
            "runtime: vllm\ndefaults:\n  distributed_executor_backend: ray\ncommand: vllm serve {model}\n",
            "vllm-ray",
        ),
        ("command: vllm serve {model} --distributed-executor-backend ray\n", "vllm-ray"),
        ("command: vllm serve {model} --distributed-executor-backend=ray\n", "vllm-ray"),
        ("runtime: vllm-ray\ncommand: vllm serve {model}\n", "vllm-ray"),
        (
            "runtime: vllm-distributed\ndefaults:\n  distributed_executor_backend: ray\n"
            "command: vllm serve {model}\n",
            "vllm-distributed",
        ),
    ],
)
def test_runtime_resolution(snippet: str, runtime: str) -> None:
    assert parse_recipe("model: m\n" + snippet, "r").runtime == runtime


def test_unknown_keys_are_kept() -> None:
    text = V2 + "readiness:\n  path: /health\nmy_team_note: keep me\n"
    r = parse_recipe(text, "x")
    assert r.extra["readiness"] == {"path": "/health"}
    assert r.extra["my_team_note"] == "keep me"


def test_yaml_syntax_error_has_file_line_column(tmp_path: Path) -> None:
    path = write(tmp_path, "broken", 'model: m\ncommand: "vllm serve {model}\ndefaults: [\n')
    with pytest.raises(RecipeError) as exc:
        load_recipe_file(path)
    assert exc.value.message.startswith(f"{path}:")
    line_col = exc.value.message[len(str(path)) + 1 :].split(":")[:2]
    assert all(part.isdigit() for part in line_col)
    assert "YAML syntax error" in exc.value.message
    err = error_of("model: m\n  command: x\n", "inline")
    assert err.message.startswith("inline:2:10: YAML syntax error")


def test_missing_model_and_command() -> None:
    err = error_of("command: vllm serve {model}\n")
    assert "no `model`" in err.message and "model:" in err.remedy
    err = error_of("model: m\n")
    assert "no `command`" in err.message and "vllm serve {model}" in err.remedy


def test_placeholder_without_value_is_named() -> None:
    err = error_of("model: m\ncommand: vllm serve {model} --max-num-seqs {max_num_seqs}\n")
    assert "{max_num_seqs}" in err.message
    assert "max_num_seqs:" in err.remedy and "defaults" in err.remedy


@pytest.mark.parametrize(
    ("snippet", "key"),
    [
        ('max_nodes: "two"\n', "max_nodes"),
        ("min_nodes: 1.5\n", "min_nodes"),
        ("defaults: [1, 2]\n", "defaults"),
        ("env:\n  A: {b: 1}\n", "env.A"),
        ("env: [A]\n", "env"),
        ("defaults:\n  port: eighty\n", "defaults.port"),
        ("defaults:\n  gpu_memory_utilization: high\n", "defaults.gpu_memory_utilization"),
        ("defaults:\n  enable_prefix_caching: 1\n", "defaults.enable_prefix_caching"),
        ("metadata: just text\n", "metadata"),
        ("mods: mods/x\n", "mods"),
        ("container: [a]\n", "container"),
    ],
)
def test_wrong_type_names_the_key(snippet: str, key: str) -> None:
    err = error_of("model: m\ncommand: vllm serve {model}\n" + snippet)
    assert f"`{key}`" in err.message


def test_other_shape_errors() -> None:
    assert "mapping" in error_of("- a\n- b\n").message
    assert "min_nodes (3)" in error_of("model: m\ncommand: x\nmin_nodes: 3\nmax_nodes: 2\n").message
    assert "recipe_version" in error_of('recipe_version: "9"\nmodel: m\ncommand: x\n').message
    assert "at least 1" in error_of("model: m\ncommand: x\nmax_nodes: 0\n").message


def test_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user, bundled = tmp_path / "user", tmp_path / "bundled"
    write(bundled, "alpha", "model: bundled/alpha\ncommand: vllm serve {model}\n")
    write(bundled, "beta", "model: bundled/beta\ncommand: vllm serve {model}\n")
    write(user, "alpha", "model: user/alpha\ncommand: vllm serve {model}\n")
    loose = write(
        tmp_path / "elsewhere", "alpha", "model: path/alpha\ncommand: vllm serve {model}\n"
    )

    r = find_recipe("alpha", user_dir=user, bundled_dir=bundled)
    assert (r.model, r.source) == ("user/alpha", "user")
    r = find_recipe("beta", user_dir=user, bundled_dir=bundled)
    assert (r.model, r.source) == ("bundled/beta", "bundled")
    r = find_recipe(str(loose), user_dir=user, bundled_dir=bundled)
    assert (r.model, r.source, r.name) == ("path/alpha", "path", "alpha")
    r = find_recipe("beta.yaml", user_dir=user, bundled_dir=bundled)
    assert r.model == "bundled/beta"

    # the default user folder is platformdirs' config dir (XDG_CONFIG_HOME in tests)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert user_recipes_dir() == tmp_path / "xdg" / "spark-tui" / "recipes"
    write(user_recipes_dir(), "beta", "model: xdg/beta\ncommand: vllm serve {model}\n")
    assert find_recipe("beta", bundled_dir=bundled).source == "user"


def test_unknown_name_lists_names_and_close_matches(tmp_path: Path) -> None:
    bundled = tmp_path / "b"
    for name in ("glm-5.3-flash", "gpt-oss-120b"):
        write(bundled, name, "model: m\ncommand: vllm serve {model}\n")
    with pytest.raises(RecipeError) as exc:
        find_recipe("glm-5.3-flsh", user_dir=tmp_path / "none", bundled_dir=bundled)
    assert "did you mean glm-5.3-flash" in exc.value.message
    assert "glm-5.3-flash, gpt-oss-120b" in exc.value.remedy
    with pytest.raises(RecipeError) as exc:
        find_recipe("./missing/file.yaml", user_dir=tmp_path, bundled_dir=bundled)
    assert "does not exist" in exc.value.message


def test_list_recipes_shadowing_and_broken_files(tmp_path: Path) -> None:
    user, bundled = tmp_path / "user", tmp_path / "bundled"
    write(bundled, "alpha", "model: bundled/alpha\ncommand: vllm serve {model}\n")
    write(user, "alpha", "model: user/alpha\ncommand: vllm serve {model}\n")
    write(user, "zeta", "model: user/zeta\ncommand: vllm serve {model}\n")
    write(user, "broken", "model: [\n")
    errors: list[RecipeError] = []
    found = list_recipes(user, bundled, errors=errors)
    assert [(r.name, r.source) for r in found] == [
        ("alpha", "user"),
        ("alpha", "bundled"),
        ("zeta", "user"),
    ]
    assert len(errors) == 1 and "broken.yaml" in errors[0].message
    with pytest.raises(RecipeError):
        list_recipes(user, bundled)


def test_bundled_dir_is_the_checkout_recipes_folder() -> None:
    assert bundled_recipes_dir() == REPO / "recipes"
    assert (bundled_recipes_dir() / "glm-5.3-flash.yaml").is_file()


def test_recipes_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["recipes", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_name = {row["name"]: row for row in rows}
    assert {"glm-5.3-flash", "qwen3.8-flash-next", "nemotron-3-nano-30b-a3b-nvfp4"} <= set(by_name)
    glm = by_name["glm-5.3-flash"]
    assert glm["model"] == "nvidia/GLM-5.3-Flash-FP4-Local"
    assert glm["runtime"] == "vllm-distributed"
    assert (glm["min_nodes"], glm["max_nodes"]) == (2, 2)
    assert glm["container"] == "eugr/spark-vllm-b12x:nightly-20261015"
    assert glm["source"] == "bundled" and glm["path"].endswith("glm-5.3-flash.yaml")
    assert glm["description"]
    assert by_name["gpt-oss-120b"]["facts_missing"] == []


def test_recipes_command_table_shows_user_shadowing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    write(user_recipes_dir(), "gpt-oss-120b", "model: mine/gpt\ncommand: vllm serve {model}\n")
    write(user_recipes_dir(), "oops", "model: m\ncommand: vllm serve {model} {nope}\n")
    assert cli.main(["recipes"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    # Each recipe's model and runtime on an indented line under it (80-column terminals).
    assert lines[0].split() == ["NAME", "NODES", "SOURCE", "FACTS"]
    gpt = [line for line in lines if line.startswith("gpt-oss-120b")]
    assert "user" in gpt[0] and "bundled (shadowed)" in gpt[1]
    assert "{nope}" in err


def test_recipes_command_imports_no_tui_or_remote_stack() -> None:
    code = (
        "import sys; from spark_tui import cli; cli.main(['recipes', '--json']);"
        "bad = [m for m in ('textual', 'asyncssh', 'docker') if m in sys.modules];"
        "sys.exit(3 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()

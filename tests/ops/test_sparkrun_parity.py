"""Every recipe of sparkrun's official, experimental and eugr registries, planned by
spark-tui as a sparkrun user has them (sparkrun's registries.yaml and its clones, local git
repositories this test makes from the fixtures), against the serve command sparkrun 0.4.2
itself renders for it (tests/fixtures/sparkrun_registries/expected.json, made by
generate.py there): the same serve flags, and the same mods run before `vllm serve`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_tui import cli
from spark_tui.core.recipe_loader import find_recipe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PARITY = FIXTURES / "sparkrun_registries"
EXPECTED = json.loads((PARITY / "expected.json").read_text(encoding="utf-8"))
SOURCE: dict[str, Any] = EXPECTED["_source"]
RECIPES: list[dict[str, Any]] = EXPECTED["recipes"]
VLLM = [r for r in RECIPES if r["runtime"] in ("vllm-distributed", "vllm-ray")]
OTHER = [r for r in RECIPES if r not in VLLM]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
# The plan's rendezvous port: NVIDIA's playbook's (sparkrun's own default is 25000).
PLAYBOOK_MASTER_PORT = "29501"

# vLLM's argparse takes these as one flag: `-tp` is `--tensor-parallel-size`, `--a_b` is
# `--a-b`, `--flag=v` is `--flag v`; the order of different flags does not matter to it.
SHORT_FLAGS = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
}
# Where spark-tui's serve flags may differ from sparkrun's, and why (nothing else may).
ALLOWED_DIFFERENCES = {
    "--served-model-name": "sparkrun adds the model id as the served name (its containers "
    "serve a local snapshot path offline); spark-tui passes the id itself, whose served "
    "name is that id by vLLM's default: allowed only when the name sparkrun adds is the "
    "model argument",
    "--master-port": "the rendezvous port is the plan's, NVIDIA's playbook's 29501 "
    "(sparkrun's init_port is 25000): allowed only as a different value of the flag both "
    "pass on the same ranks",
    "a setting the user gives": "spark-tui applies a setting given on the command line that "
    "the recipe's command does not write as a placeholder (sparkrun drops it without a "
    "word): allowed only as that setting's flag with the value given",
}
# The flags sparkrun's shortcut words of the fixtures set (`--max-model-len 8192 --gpu-mem
# 0.5 -o max_num_batched_tokens=4096`), with their values.
SHORTCUT_FLAGS = {
    "--max-model-len": ("8192",),
    "--gpu-memory-utilization": ("0.5",),
    "--max-num-batched-tokens": ("4096",),
}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV}
    )


@pytest.fixture(scope="module")
def sparkrun_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sparkrun user's home as `sparkrun registry update` leaves it: its registries.yaml
    naming the three registries (their repositories are local git repositories made from
    the fixtures) and a clone of each where sparkrun keeps it (official and experimental,
    one repository, as links to one clone)."""
    root = tmp_path_factory.mktemp("sparkrun-user")
    home = root / "home"
    clones = home / ".cache" / "sparkrun" / "registries"
    clones.mkdir(parents=True)
    remotes: dict[str, Path] = {}
    for reg in SOURCE["registries"].values():
        repo = reg["repo"]
        if repo not in remotes:
            remote = root / "remotes" / repo
            shutil.copytree(PARITY / "repos" / repo, remote)
            git(remote, "init", "-q", "-b", "main")
            git(remote, "add", ".")
            git(remote, "commit", "-q", "-m", "recipes")
            remotes[repo] = remote
    shared = [r["repo"] for r in SOURCE["registries"].values()]
    entries = []
    for name, reg in SOURCE["registries"].items():
        if shared.count(reg["repo"]) == 1:
            git(clones, "clone", "-q", f"file://{remotes[reg['repo']]}", name)
        else:
            # Registries of one repository share one clone, each name a link to it.
            one = "_url_" + reg["repo"].replace("/", "_")
            if not (clones / one).exists():
                git(clones, "clone", "-q", f"file://{remotes[reg['repo']]}", one)
            (clones / name).symlink_to(clones / one)
        entries.append(
            {
                "name": name,
                "url": f"file://{remotes[reg['repo']]}",
                "subpath": reg["subpath"],
                "mods_subpath": reg["mods_subpath"],
                "visible": reg["visible"],
                "trusted": True,
            }
        )
    config = home / ".config" / "sparkrun" / "registries.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"registries": entries}), encoding="utf-8")
    return home


@pytest.fixture
def sparkrun_user(sparkrun_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPARK_TUI_SPARKRUN_HOME", str(sparkrun_home))
    return sparkrun_home


def facts_file(tmp_path: Path, count: int) -> Path:
    """`count` GB10 nodes, their ConnectX addresses the hosts sparkrun rendered for."""
    template = json.loads((FIXTURES / "simulated_facts_glm53_2x128.json").read_text())
    nodes = []
    for i in range(count):
        node = json.loads(json.dumps(template["nodes"][0]))
        node.update(name=f"spark-{i + 1}", address=f"10.0.0.{i + 1}", models=[], images=[])
        node["interfaces"][0]["ipv4"] = f"192.168.100.{i + 1}"
        nodes.append(node)
    path = tmp_path / f"facts-{count}.json"
    path.write_text(json.dumps({"nodes": nodes}), encoding="utf-8")
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def serve_flags(argv: list[str]) -> tuple[list[str], dict[str, list[tuple[str, ...]]]]:
    """A `vllm serve` argv as vLLM's argparse reads it: the positionals, and each flag
    (one spelling) with the values it is given, in the order given."""
    assert argv[:2] == ["vllm", "serve"], argv[:3]

    def is_flag(token: str) -> bool:
        return token.startswith("-") and not token[1:2].isdigit()

    positionals: list[str] = []
    flags: dict[str, list[tuple[str, ...]]] = {}
    i = 2
    while i < len(argv):
        token = argv[i]
        i += 1
        if not is_flag(token):
            positionals.append(token)
            continue
        name, eq, inline = token.partition("=")
        name = SHORT_FLAGS.get(name, name)
        head, dot, rest = name.partition(".")
        name = "--" + head[2:].replace("_", "-") + dot + rest if head.startswith("--") else name
        values: list[str] = [inline] if eq else []
        while not eq and i < len(argv) and not is_flag(argv[i]):
            values.append(argv[i])
            i += 1
        flags.setdefault(name, []).append(tuple(values))
    return positionals, flags


def allowing(
    sparkrun: tuple[list[str], dict[str, list[tuple[str, ...]]]],
    ours: tuple[list[str], dict[str, list[tuple[str, ...]]]],
    given: dict[str, tuple[str, ...]] | None = None,
) -> tuple[list[str], dict[str, list[tuple[str, ...]]]]:
    """sparkrun's flags with the ALLOWED_DIFFERENCES taken as spark-tui has them, each only
    where its reason holds (`given`: the flags of the settings the user gave)."""
    positionals, flags = sparkrun[0], dict(sparkrun[1])
    for flag, value in (given or {}).items():
        if ours[1].get(flag) == [value]:
            flags[flag] = [value]
    served = flags.get("--served-model-name")
    if served == [(positionals[0],)] and "--served-model-name" not in ours[1]:
        del flags["--served-model-name"]
    port = flags.get("--master-port")
    if port is not None and ours[1].get("--master-port") == [(PLAYBOOK_MASTER_PORT,)]:
        flags["--master-port"] = [(PLAYBOOK_MASTER_PORT,)]
    return positionals, flags


def fixture_path(path: str, home: Path) -> str:
    """A path inside a registry clone as the fixture names it (`<owner>/<repo>/<path>`)."""
    clones = home / ".cache" / "sparkrun" / "registries"
    resolved = Path(path).resolve()
    for name, reg in SOURCE["registries"].items():
        clone = (clones / name).resolve()
        if resolved.is_relative_to(clone):
            return f"{reg['repo']}/{resolved.relative_to(clone).as_posix()}"
    raise AssertionError(f"{path} is in none of the registry clones")


@pytest.mark.parametrize("expected", VLLM, ids=[r["name"] for r in VLLM])
def test_serve_flags_equal_sparkruns_and_the_mods_run_before_serve(
    expected: dict[str, Any],
    sparkrun_user: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if expected["ranks"] > expected["nodes"]:
        # A solo recipe whose layout wants more GPUs than its one node has: sparkrun starts
        # it there (vLLM then cannot place the ranks); spark-tui refuses it with the layout
        # that fits, and plans the recipe's own layout only on the nodes that layout needs.
        facts = facts_file(tmp_path, expected["nodes"])
        code, _out, err = run_cli(capsys, "plan", expected["name"], "--facts", str(facts))
        assert code != 0 and "--set tensor_parallel=1" in err and "Traceback" not in err
    facts = facts_file(tmp_path, expected["ranks"])
    code, out, err = run_cli(capsys, "plan", expected["name"], "--facts", str(facts), "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert len(plan["ranks"]) == expected["ranks"]
    assert plan["runtime"] == expected["runtime"]
    # A Ray cluster's serve command runs on its head once Ray has formed, as sparkrun's.
    ours = (
        [plan["serve_exec"]]
        if plan["runtime"] == "vllm-ray"
        else [r["argv"] for r in plan["ranks"]]
    )
    assert len(ours) == len(expected["argv"])
    for rank, (theirs, mine) in enumerate(zip(expected["argv"], ours, strict=True)):
        parsed = serve_flags(mine)
        assert parsed == allowing(serve_flags(theirs), parsed), f"rank {rank}"

    # Each mod as sparkrun resolves it (the same folder of the same registry), copied into
    # every rank's container and run there before the serve command, as sparkrun runs it.
    mods = [(m["folder"], m["exec"]) for m in expected["mods"]]
    for rank in plan["ranks"]:
        steps = [s for s in rank["prelaunch"] if s["mod"]]
        copies = [fixture_path(s["source"], sparkrun_user) for s in steps if s["kind"] == "copy"]
        runs = [s["command"] for s in steps if s["kind"] == "exec"]
        assert list(zip(copies, runs, strict=True)) == mods
        dests = [f"/workspace/mods/{Path(folder).name}" for folder, _run in mods]
        assert [c["dest"] for c in rank["copies"]] == dests
        if not mods:
            assert rank["entrypoint"] is None
            continue
        # The container's entrypoint runs them in order, then execs the serve command.
        script = rank["entrypoint"][2]
        at = [script.index(f"sh -c {shlex.quote(run)} ") for _folder, run in mods]
        assert at == sorted(at) and script.rstrip().endswith('exec "$@"')
        assert rank["command"] == rank["argv"]


@pytest.mark.parametrize("expected", VLLM, ids=[r["name"] for r in VLLM])
def test_sparkruns_shortcut_words_give_sparkruns_serve_flags(
    expected: dict[str, Any],
    sparkrun_user: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    facts = facts_file(tmp_path, expected["ranks"])
    shortcuts = SOURCE["shortcuts"]
    code, out, err = run_cli(
        capsys, "plan", expected["name"], "--facts", str(facts), "--json", *shortcuts
    )
    assert code == 0, err
    plan = json.loads(out)
    ours = (
        [plan["serve_exec"]]
        if plan["runtime"] == "vllm-ray"
        else [r["argv"] for r in plan["ranks"]]
    )
    for rank, (theirs, mine) in enumerate(zip(expected["shortcut_argv"], ours, strict=True)):
        parsed = serve_flags(mine)
        assert parsed == allowing(serve_flags(theirs), parsed, SHORTCUT_FLAGS), f"rank {rank}"


@pytest.mark.parametrize("expected", OTHER, ids=[r["name"] for r in OTHER])
def test_a_recipe_of_another_runtime_is_refused_with_sparkruns_command(
    expected: dict[str, Any],
    sparkrun_user: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _out, err = run_cli(
        capsys, "plan", expected["name"], "--facts", str(facts_file(tmp_path, 1))
    )
    assert code != 0
    assert f"its runtime is {expected['runtime']!r}" in err
    assert f"`sparkrun run {expected['name']}`" in err
    assert "Traceback" not in err


def test_every_registry_recipe_is_listed(
    sparkrun_user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "recipes", "--json")
    assert code == 0, err
    listed = {
        (row["origin"], fixture_path(row["path"], sparkrun_user))
        for row in json.loads(out)
        if str(row["origin"]).startswith("sparkrun:")
    }
    assert listed == {(f"sparkrun:{r['registry']}", r["path"]) for r in RECIPES}
    counts = {name: sum(r["registry"] == name for r in RECIPES) for name in SOURCE["registries"]}
    assert counts == {"official": 9, "eugr": 35, "experimental": 28}


def test_recipes_shows_the_nodes_plan_runs_each_recipe_on(
    sparkrun_user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The ranks sparkrun renders for each vLLM recipe are the nodes `plan` takes for it
    # (one rank per Spark): the 3x- and 4x-spark-cluster recipes need 3 and 4.
    code, out, err = run_cli(capsys, "recipes", "--json")
    assert code == 0, err
    rows = {
        (row["origin"], fixture_path(row["path"], sparkrun_user)): row
        for row in json.loads(out)
        if str(row["origin"]).startswith("sparkrun:")
    }
    for r in RECIPES:
        row = rows[(f"sparkrun:{r['registry']}", r["path"])]
        assert row["nodes"] == (r["ranks"] if r in VLLM else None), r["name"]
    code, table, err = run_cli(capsys, "recipes")
    assert code == 0, err
    # The NODES column wherever the layout puts it (within 80 columns, each recipe's model
    # and runtime are on an indented line of their own).
    header, *rows = table.splitlines()
    at = header.split().index("NODES")
    cells = {line.split()[0]: line.split()[at] for line in rows if not line.startswith(" ")}
    assert cells["4x-spark-cluster/qwen3.5-397b-int4-autoround"] == "4"
    assert cells["nemotron-3-ultra-nvfp4"] == "4"  # in 4x-spark-cluster/, its name unique
    assert cells["3x-spark-cluster/qwen3.5-397b-int4-autoround"] == "3"
    assert cells["glm-5.2-nvfp4"] == "8"
    # A solo recipe whose command writes `-tp 2`: plan takes 2 nodes, the recipe says 1.
    solo = next(line for line in table.splitlines() if line.startswith("gemma4-26b-a4b-nvfp4 "))
    assert " 2 (max 1) " in solo


def test_the_comparison_tells_a_different_flag_apart() -> None:
    """The allowed differences stay within their reasons."""
    theirs = ["vllm", "serve", "m", "-tp", "2", "--served-model-name", "m", "--master-port", "1"]
    same = ["vllm", "serve", "m", "--tensor-parallel-size=2", "--master-port", "29501"]
    assert serve_flags(same) == allowing(serve_flags(theirs), serve_flags(same))
    for other in (
        ["vllm", "serve", "m", "-tp", "4", "--master-port", "29501"],  # another value
        ["vllm", "serve", "m", "-tp", "2"],  # no rendezvous port
        ["vllm", "serve", "m", "-tp", "2", "--master-port", "29501", "-pp", "1"],  # one more
        ["vllm", "serve", "other", "-tp", "2", "--master-port", "29501"],  # another model
    ):
        assert serve_flags(other) != allowing(serve_flags(theirs), serve_flags(other)), other
    named = ["vllm", "serve", "m", "-tp", "2", "--served-model-name", "x", "--master-port", "1"]
    assert serve_flags(same) != allowing(serve_flags(named), serve_flags(same))
    given = {"--max-model-len": ("8192",)}
    applied = [*same, "--max-model-len", "8192"]
    assert serve_flags(applied) == allowing(serve_flags(theirs), serve_flags(applied), given)
    other_value = [*same, "--max-model-len", "4096"]
    assert serve_flags(other_value) != allowing(
        serve_flags(theirs), serve_flags(other_value), given
    )


def test_a_plain_name_reaches_the_recipe_sparkrun_takes_for_it(sparkrun_user: Path) -> None:
    """The name without `@REGISTRY/`, as a sparkrun user types it: the same file as
    sparkrun's; a hidden registry's recipe, which sparkrun finds only by `@REGISTRY/NAME`,
    spark-tui finds by its plain name too unless a visible one of that name comes first."""
    for expected in RECIPES:
        found = fixture_path(str(find_recipe(expected["plain"]).path), sparkrun_user)
        assert found == (expected["plain_path"] or expected["path"]), expected["name"]

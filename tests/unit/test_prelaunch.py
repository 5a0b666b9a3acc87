"""The prelaunch wrapper (mods and pre_exec before `vllm serve`), run for real under /bin/sh,
and the mods in the plan (JSON and the shell form)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from spark_tui.core import logclass, prelaunch
from spark_tui.core.facts import NodeFacts
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import PrelaunchStep
from spark_tui.core.recipe_loader import bundled_recipes_dir, find_recipe
from spark_tui.core.registry import mod_exec

HOSTILE = "a b'; touch PWNED; echo '$(touch PWNED2)"
FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "simulated_facts_glm53_2x128.json"


def make_mod(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.sh").write_text("#!/bin/sh\n" + body)  # not executable: chmod +x does it
    return folder


def run_wrapper(steps: list[PrelaunchStep], cwd: Path, serve: list[str]) -> tuple[int, list[str]]:
    entry = prelaunch.entrypoint(steps)
    assert entry is not None and entry[:2] == ["/bin/sh", "-c"]
    # One stream, as the container's log interleaves them.
    res = subprocess.run(
        [*entry, *serve],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=30,
    )
    return res.returncode, res.stdout.splitlines()


def exec_step(folder: Path) -> PrelaunchStep:
    return PrelaunchStep("exec", command=mod_exec(str(folder)), mod=folder.name)


def test_mods_run_in_order_in_their_folder_then_the_serve_argv_unchanged(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first = make_mod(tmp_path / "mods" / "first", 'echo "first in $PWD ws=$WORKSPACE_DIR"\n')
    second = make_mod(tmp_path / "mods" / HOSTILE, "echo second; echo tmpl > chat.jinja\n")
    steps = [
        PrelaunchStep("exec", command="echo own pre_exec"),
        exec_step(first),
        exec_step(second),
    ]
    serve = ["sh", "-c", 'echo "serve in $PWD args=$*"', "x", "--flag", "a b", "$(no)"]
    code, lines = run_wrapper(steps, work, serve)
    assert code == 0, lines
    body = [t for t in lines if prelaunch.MARK not in t]
    assert body == [
        "own pre_exec",
        f"first in {first} ws={work}",
        "second",
        f"serve in {work} args=--flag a b $(no)",  # the serve cwd and argv are untouched
    ]
    assert (second / "chat.jinja").read_text() == "tmpl\n"
    assert not list(tmp_path.rglob("PWNED*")), "a mod name reached the shell unquoted"
    markers = [t for t in lines if prelaunch.MARK in t]
    assert markers[0] == "spark-tui prelaunch: pre_exec 1: start"
    assert markers[-1] == "spark-tui prelaunch: done; starting the serve command"


def test_a_failing_mod_ends_the_container_with_its_code_and_its_lines(tmp_path: Path) -> None:
    ok = make_mod(tmp_path / "ok", "echo fine\n")
    bad = make_mod(
        tmp_path / "bad", "echo patching vllm\necho 'patch does not apply' >&2\nexit 7\n"
    )
    never = make_mod(tmp_path / "never", "touch ran\n")
    code, lines = run_wrapper(
        [exec_step(ok), exec_step(bad), exec_step(never)], tmp_path, ["touch", "served"]
    )
    assert code == 7
    assert not (tmp_path / "served").exists() and not (never / "ran").exists()
    step = prelaunch.failed_step(lines)
    assert step is not None and step.what == "mod bad" and step.exit_code == 7
    assert set(step.lines[:-1]) == {"patching vllm", "patch does not apply"}
    assert step.lines[-1] == "spark-tui prelaunch: mod bad failed with exit code 7"
    assert "fine" not in step.lines
    # The log classifier: the failure marker is an error, a start marker a startup phase.
    assert logclass.classify(step.lines[-1]).kind == "error"
    assert logclass.classify("spark-tui prelaunch: mod bad: start").kind == "phase"
    assert prelaunch.failed_step(["spark-tui prelaunch: mod ok: start", "fine"]) is None


def test_no_steps_no_wrapper() -> None:
    assert prelaunch.entrypoint([]) is None
    copy_only = [PrelaunchStep("copy", source="/a", dest="/b")]
    assert prelaunch.entrypoint(copy_only) is None
    assert prelaunch.copies(copy_only) == [("/a", "/b")]


def _modded_recipe(tmp_path: Path, name: str) -> Path:
    data = yaml.safe_load((bundled_recipes_dir() / "glm-5.3-flash.yaml").read_text())
    data["mods"] = [f"mods/{name}"]
    make_mod(tmp_path / "mods" / name, "echo hi\n")
    path = tmp_path / "modded.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _nodes() -> list[NodeFacts]:
    return [NodeFacts.from_dict(n) for n in json.loads(FACTS.read_text())["nodes"]]


def test_every_rank_of_the_plan_carries_the_mods(tmp_path: Path) -> None:
    recipe = find_recipe(str(_modded_recipe(tmp_path, "fix-tmpl")))
    plan = build_plan(recipe, apply_overrides(recipe, []), _nodes())
    data = plan.to_dict()
    for rank, spec in zip(data["ranks"], plan.ranks, strict=True):
        assert rank["mods"] == ["fix-tmpl"]
        assert rank["copies"] == [
            {"source": str(tmp_path / "mods" / "fix-tmpl"), "dest": "/workspace/mods/fix-tmpl"}
        ]
        assert [s["kind"] for s in rank["prelaunch"]] == ["copy", "exec"]
        assert rank["entrypoint"][:2] == ["/bin/sh", "-c"]
        assert "cd /workspace/mods/fix-tmpl && chmod +x run.sh && ./run.sh" in rank["entrypoint"][2]
        # The serve argv stays the container command, so `${NAME}` references still resolve.
        assert rank["command"] == rank["argv"] and rank["argv"][:2] == ["vllm", "serve"]
        assert spec.container.copies == [
            (str(tmp_path / "mods" / "fix-tmpl"), "/workspace/mods/fix-tmpl")
        ]


def test_shell_form_creates_copies_then_starts_and_quotes_every_value(tmp_path: Path) -> None:
    recipe = find_recipe(str(_modded_recipe(tmp_path, HOSTILE)))
    plan = build_plan(recipe, apply_overrides(recipe, []), _nodes())
    script = plan.to_shell()
    section = script[script.index("rank1() {") : script.index("\n}", script.index("rank1() {"))]
    assert "docker run -d" not in section
    create, copy, start = (
        section.index("docker create"),
        section.index("| docker cp - "),
        section.index("docker start "),
    )
    assert create < copy < start
    assert "--entrypoint /bin/sh" in section and "--transform" in section
    assert f"# mods, run in the container before the serve command: {HOSTILE}" in script
    syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert syntax.returncode == 0, syntax.stderr
    # Running the file with no section only prints its usage: nothing of a value executes.
    res = subprocess.run(
        ["bash", "-c", script, "plan"], cwd=tmp_path, capture_output=True, text=True
    )
    assert res.returncode == 2 and not list(tmp_path.rglob("PWNED*"))

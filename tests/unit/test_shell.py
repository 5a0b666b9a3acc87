"""The shell export of a launch plan: valid bash, every value quoted, secrets expanded only
by the user's shell. The generated script is run against a fake `docker` that records its
argv, so the test sees exactly what a person's shell would pass."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from spark_tui.core.facts import Interface, NodeFacts
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import LaunchPlan, build_plan
from spark_tui.core.recipe import Recipe
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.shell import argv_lines, plan_to_shell

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")

EVIL = "4096; rm -rf /"


def nodes(home: Path | None) -> list[NodeFacts]:
    out = []
    for i, (eth, ib) in enumerate(
        [("enp1s0f1np1", "rocep1s0f1"), ("enP2p1s0f1np1", "roceP2p1s0f1")]
    ):
        out.append(
            NodeFacts(
                name=f"spark-{'ab'[i]}",
                address=f"10.0.0.{i + 1}",
                home=str(home / f"home{i}") if home else None,
                interfaces=[Interface(eth, ib, "up", f"192.168.100.{10 + i}")],
            )
        )
    return out


def glm_plan(home: Path | None, sets: list[str] | None = None) -> LaunchPlan:
    recipe = find_recipe("glm-5.3-flash")
    return build_plan(recipe, apply_overrides(recipe, sets or []), nodes(home))


def bash_n(script: str) -> subprocess.CompletedProcess[str]:
    assert BASH is not None
    return subprocess.run([BASH, "-n"], input=script, text=True, capture_output=True, timeout=30)


def test_script_is_valid_bash_and_keeps_a_hostile_value_one_argument(tmp_path: Path) -> None:
    plan = glm_plan(tmp_path, [f"tool_call_parser={EVIL}"])
    script = plan_to_shell(plan)
    result = bash_n(script)
    assert result.returncode == 0, result.stderr
    words = shlex.split(script, comments=True)
    assert words.count(EVIL) == 2  # one per rank, each a single literal word
    assert "-rf" not in words and "4096;" not in words
    assert plan.to_shell() == script


def test_script_layout_follows_the_playbook(tmp_path: Path) -> None:
    script = plan_to_shell(glm_plan(tmp_path))
    assert "# --- rank 0 on spark-a (head) ---" in script
    assert "# --- rank 1 on spark-b (worker) ---" in script
    assert "--privileged --gpus all --ipc host --network host" in script
    assert "--shm-size=16g" in script
    assert "--ulimit nofile=1048576:1048576" in script
    assert '-e HF_TOKEN="${HF_TOKEN:-}"' in script
    assert f"-v {tmp_path}/home1/.cache/huggingface:/root/.cache/huggingface" in script
    assert script.index("mkdir -p") < script.index("docker run -d")
    stop = script.index("# --- stop")
    assert "docker stop spark-tui-" in script[stop:] and "docker rm spark-tui-" in script[stop:]
    # One flag per line in the serve command, like the playbook's.
    assert "\n      --tensor-parallel-size 2 \\\n" in script


def test_unknown_home_is_written_as_the_users_home() -> None:
    script = plan_to_shell(glm_plan(None))
    assert bash_n(script).returncode == 0
    assert '-v "$HOME"/.cache/huggingface:/root/.cache/huggingface' in script
    assert 'mkdir -p "$HOME"/.cache/huggingface' in script


def _fake_docker(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "docker-argv"
    fake = bin_dir / "docker"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\0" "$@" >> {shlex.quote(str(record))}\n')
    fake.chmod(0o755)
    return bin_dir, record


def _run(script_path: Path, section: str, bin_dir: Path, **env: str) -> list[str]:
    assert BASH is not None
    record = bin_dir.parent / "docker-argv"
    record.unlink(missing_ok=True)
    run_env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(bin_dir.parent), **env}
    result = subprocess.run(
        [BASH, str(script_path), section], env=run_env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return record.read_text().split("\0")[:-1]


def test_running_a_section_passes_the_plan_argv_exactly(tmp_path: Path) -> None:
    plan = glm_plan(tmp_path, [f"tool_call_parser={EVIL}"])
    script_path = tmp_path / "launch.sh"
    script_path.write_text(plan_to_shell(plan))
    bin_dir, _ = _fake_docker(tmp_path)

    argv = _run(script_path, "rank1", bin_dir, HF_TOKEN="hf_from_user_shell")
    rank = plan.ranks[1]
    assert argv[:3] == ["run", "-d", "--name"] and argv[3] == rank.container.name
    assert argv[-len(rank.argv) :] == rank.argv
    assert argv[-len(rank.argv) - 1] == rank.container.image
    assert EVIL in argv
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    # The user's shell filled the secret; the script itself never held it.
    assert "HF_TOKEN=hf_from_user_shell" in env
    assert "NCCL_SOCKET_IFNAME=enP2p1s0f1np1" in env
    assert "hf_from_user_shell" not in script_path.read_text()
    assert (tmp_path / "home1" / ".cache" / "b12x").is_dir()  # the mkdir -p ran

    assert _run(script_path, "stop1", bin_dir) == [
        "stop",
        rank.container.name,
        "rm",
        rank.container.name,
    ]


def test_no_argument_prints_usage_and_starts_nothing(tmp_path: Path) -> None:
    assert BASH is not None
    script_path = tmp_path / "launch.sh"
    script_path.write_text(plan_to_shell(glm_plan(tmp_path)))
    bin_dir, record = _fake_docker(tmp_path)
    result = subprocess.run(
        [BASH, str(script_path)],
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "usage:" in result.stderr
    assert not record.exists()


def test_ray_script_has_a_serve_section(tmp_path: Path) -> None:
    recipe = Recipe(
        name="ray-test",
        model="org/model",
        command="vllm serve {model} --port {port} -tp {tensor_parallel}",
        runtime="vllm-ray",
        container="example/vllm:1",
        defaults={"port": 8000, "tensor_parallel": 2},
    )
    plan = build_plan(recipe, apply_overrides(recipe, []), nodes(tmp_path))
    script = plan_to_shell(plan)
    assert bash_n(script).returncode == 0
    assert "# --- rank 0 on spark-a (ray head) ---" in script
    assert f"docker exec {plan.ranks[0].container.name} vllm serve org/model" in script
    assert "--distributed-executor-backend ray" in script
    script_path = tmp_path / "ray.sh"
    script_path.write_text(script)
    bin_dir, record = _fake_docker(tmp_path)
    # `ray status` answers with one node first, then both: serve waits for the second.
    status = tmp_path / "status-calls"
    one = FIXTURES / "ray_status_head_only_2600.txt"
    two = FIXTURES / "ray_status_two_nodes_2600.txt"
    (bin_dir / "docker").write_text(
        "#!/bin/sh\n"
        f'printf "%s\\0" "$@" >> {shlex.quote(str(record))}\n'
        'if [ "$3" = ray ]; then\n'
        f"  echo x >> {shlex.quote(str(status))}\n"
        f'  if [ "$(wc -l < {shlex.quote(str(status))})" -lt 2 ]; then '
        f"cat {shlex.quote(str(one))}; else cat {shlex.quote(str(two))}; fi\n"
        "fi\n"
    )
    argv = _run(script_path, "serve", bin_dir)
    head = plan.ranks[0].container.name
    status_argv = ["exec", head, "ray", "status", "--address", plan.rendezvous["ray_address"]]
    assert argv == [*status_argv, *status_argv, "exec", head, *(plan.serve_exec or [])]


def test_argv_lines_group_each_flag_with_its_values() -> None:
    lines = argv_lines(["vllm", "serve", "m", "--a", "1", "--b", "--c", "-1", "--d", "x y"])
    assert lines == ["vllm serve m", "--a 1", "--b", "--c -1", "--d 'x y'"]

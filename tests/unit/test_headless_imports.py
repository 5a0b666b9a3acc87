"""The headless `plan` and `check` never import Textual, asyncssh or the Docker SDK (each
run in a fresh interpreter, so nothing another test imported can hide an import)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spark_tui.core.facts import GIB, Interface, NodeFacts, facts_to_json

HEAVY = ("textual", "asyncssh", "docker")

PROBE = """
import json, sys
import spark_tui.cli as c
rc = c.main({argv!r})
heavy = sorted({{m.split('.')[0] for m in sys.modules}} & {heavy!r})
sys.stderr.write('\\nHEAVY=' + json.dumps(heavy) + '\\n')
sys.exit(rc)
"""


@pytest.fixture
def facts_file(tmp_path: Path) -> Path:
    nodes = [
        NodeFacts(
            name=name,
            address=f"10.0.0.{i + 1}",
            home="/home/nvidia",
            arch="aarch64",
            gpu_name="NVIDIA GB10",
            memory_total_bytes=128 * GIB,
            memory_available_bytes=120 * GIB,
            interfaces=[Interface(eth, ib, "up", f"192.168.100.{10 + i}", 200000)],
        )
        for i, (name, eth, ib) in enumerate(
            [("spark-a", "enp1s0f1np1", "rocep1s0f1"), ("spark-b", "enP2p1s0f1np1", "roceP2p1s0f1")]
        )
    ]
    path = tmp_path / "facts.json"
    path.write_text(facts_to_json(nodes))
    return path


def run_cli(argv: list[str]) -> tuple[int, str, list[str]]:
    code = PROBE.format(argv=argv, heavy=set(HEAVY))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    marker = result.stderr.rsplit("HEAVY=", 1)
    assert len(marker) == 2, result.stderr
    return result.returncode, result.stdout, json.loads(marker[1])


def test_plan_json_is_headless(facts_file: Path) -> None:
    rc, out, heavy = run_cli(["plan", "glm-5.3-flash", "--facts", str(facts_file), "--json"])
    assert rc == 0
    assert heavy == []
    data = json.loads(out)
    assert [r["node"] for r in data["ranks"]] == ["spark-a", "spark-b"]
    assert data["ranks"][1]["argv"][-1] == "--headless"


def test_plan_shell_and_summary_are_headless(facts_file: Path) -> None:
    for extra in (["--shell"], []):
        rc, out, heavy = run_cli(["plan", "glm-5.3-flash", "--facts", str(facts_file), *extra])
        assert rc == 0 and heavy == []
        assert "spark-b" in out


def test_check_json_is_headless(facts_file: Path) -> None:
    rc, out, heavy = run_cli(["check", "glm-5.3-flash", "--facts", str(facts_file), "--json"])
    assert heavy == []
    assert rc in (0, 1)  # fits or does not fit; never a usage error or a crash
    data = json.loads(out)
    assert data["verdict"] in ("fits", "fits_with_warnings", "does_not_fit", "unknown")


def test_plan_input_error_exit_code(facts_file: Path, tmp_path: Path) -> None:
    rc, _, heavy = run_cli(["plan", "glm-5.3-flash", "--facts", str(tmp_path / "missing.json")])
    assert rc == 2 and heavy == []

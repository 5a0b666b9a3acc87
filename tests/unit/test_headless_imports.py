"""The headless `plan` and `check` never import Textual, asyncssh or the Docker SDK, nor
asyncio or pydantic's model machinery when nothing is asked of a node or the Hub (each run
in a fresh interpreter, so nothing another test imported can hide an import)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spark_tui.core.facts import GIB, Interface, NodeFacts, facts_to_json

HEAVY = ("textual", "asyncssh", "docker")
# What an offline plan or check has no use for and would pay for at every start: asyncio
# (with ssl, socket, logging) and pydantic's BaseModel machinery (its schema generator and
# the plugin scan of every installed package; `import pydantic` alone loads neither).
SLOW = ("asyncio", "pydantic.main")

PROBE = """
import json, sys
import spark_tui.cli as c
rc = c.main({argv!r})
heavy = sorted({{m.split('.')[0] for m in sys.modules}} & {heavy!r})
slow = sorted(set(sys.modules) & {slow!r})
sys.stderr.write('\\nSLOW=' + json.dumps(slow))
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
    """Exit code, stdout, and the heavy packages the run imported."""
    rc, out, heavy, _ = run_cli_slow(argv)
    return rc, out, heavy


def run_cli_slow(argv: list[str]) -> tuple[int, str, list[str], list[str]]:
    """Exit code, stdout, the heavy packages and the SLOW modules the run imported."""
    code = PROBE.format(argv=argv, heavy=set(HEAVY), slow=set(SLOW))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    marker = result.stderr.rsplit("HEAVY=", 1)
    assert len(marker) == 2, result.stderr
    slow = marker[0].rsplit("SLOW=", 1)[1]
    return result.returncode, result.stdout, json.loads(marker[1]), json.loads(slow)


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


def test_offline_plan_and_check_load_neither_asyncio_nor_pydantic_models(
    facts_file: Path,
) -> None:
    # gpt-oss-120b's recipe carries every fact the fit needs: the Hub is not asked.
    for command in ("plan", "check"):
        rc, out, heavy, slow = run_cli_slow(
            [command, "gpt-oss-120b", "--facts", str(facts_file), "--json"]
        )
        assert rc in (0, 1) and heavy == [], (command, rc, heavy)
        assert json.loads(out)
        assert slow == [], f"`{command}` imported {slow}"
    rc, _, _, slow = run_cli_slow(["plan", "glm-5.3-flash", "--facts", str(facts_file)])
    assert rc == 0 and slow == [], slow

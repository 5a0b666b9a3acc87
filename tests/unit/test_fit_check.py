"""`spark-tui check`: human and JSON output, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tui.cli import build_parser, main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GLM_128 = str(FIXTURES / "simulated_facts_glm53_2x128.json")
GLM_64 = str(FIXTURES / "simulated_facts_glm53_2x64.json")
QWEN_64 = str(FIXTURES / "simulated_facts_qwen38_2x64.json")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_fits_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "glm-5.3-flash", "--facts", GLM_128, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "fits"
    assert [n["name"] for n in doc["nodes"]] == ["spark-a", "spark-b"]
    code, out, _ = run(capsys, "qwen3.8-flash-next", "--facts", QWEN_64, "--json")
    assert code == 0 and json.loads(out)["verdict"] == "fits"


def test_human_report_does_not_fit_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "glm-5.3-flash", "--facts", GLM_64)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "check     glm-5.3-flash  (nvidia/GLM-5.3-Flash-FP4-Local)"
    assert lines[1] == "verdict   does not fit"
    assert lines[2].startswith("layout    TP 2 x PP 1 x DP 1 = 2 ranks on 2 nodes")
    table = [ln for ln in lines if ln.startswith("spark-")]
    assert len(table) == 2 and " 59.8 " in table[0] and " 58.2 " in table[0]
    assert "  error   weights_exceed_budget: all nodes: weights need 58.1" in out
    assert "          remedy: spread the model over more nodes" in out


def test_set_tensor_parallel_3_reports_the_heads(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "glm-5.3-flash", "--facts", GLM_128, "--set", "tensor_parallel=3", "--json"
    )
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "does_not_fit"
    messages = [f["message"] for f in doc["findings"]]
    assert (
        "Total number of attention heads (64) must be divisible by tensor parallel size (3)."
        in messages
    )
    assert any(f["code"] == "nodes_mismatch" for f in doc["findings"])  # 3 ranks, 2 nodes


def test_unknown_exits_1_and_names_the_missing_facts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    facts = json.loads(Path(GLM_128).read_text())
    for n in facts["nodes"]:
        n["models"] = []
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    code, out, _ = run(capsys, "glm-5.3-flash", "--facts", str(path))
    assert code == 1
    assert "verdict   unknown (facts missing)" in out
    assert (
        "missing model facts of nvidia/GLM-5.3-Flash-FP4-Local: weight_bytes, "
        "num_hidden_layers, num_attention_heads, attention, num_key_value_heads, head_dim" in out
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["glm-5.3-flash"], "no nodes given"),
        (["glm-5.3-flash", "--facts", "/nonexistent/facts.json"], "does not exist"),
        (["no-such-recipe", "--facts", GLM_128], "no recipe named"),
        (["glm-5.3-flash", "--facts", GLM_128, "--set", "gpu_memory_utilization=2"], "2"),
    ],
)
def test_bad_input_exits_2_with_a_remedy(
    capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert fragment in err and "remedy:" in err and "Traceback" not in err


def test_help_documents_the_exit_codes() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = sub.choices["check"].format_help()  # type: ignore[attr-defined]
    assert "1 does not fit, or unknown" in " ".join(text.split())


def test_unreachable_host_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    # Port 1 on loopback refuses at once: the live-probe path is wired through to exit 3.
    code, out, err = run(capsys, "glm-5.3-flash", "--hosts", "127.0.0.1:1")
    assert code == 3 and out == "" and "remedy:" in err


def test_offline_check_imports_no_textual_asyncssh_or_docker() -> None:
    import subprocess
    import sys

    probe = (
        "import sys; from spark_tui.cli import main; import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['check', 'glm-5.3-flash', '--facts', {GLM_128!r}])\n"
        "print(sorted(m for m in ('textual', 'asyncssh', 'docker') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

"""One comparison everywhere: `history compare`, `history export`'s report and the cockpit's
history detail give the same verdict for the same two benchmarks."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from ops_helpers import glm_plan
from rich.console import Console

from spark_tui import cli
from spark_tui.ops.bench import BenchConfig
from spark_tui.ops.history import History, Run
from spark_tui.service.history import RunHistory
from spark_tui.ui.views import describe_run


def _bench(itl_p95: float) -> dict[str, Any]:
    # Eight identical gaps: the sampling noise is nil, so only the floor and the repeats
    # of the baseline set the threshold.
    level = {
        "concurrency": 8,
        "requests": 16,
        "errors": 0,
        "figures": {"itl_p95_s": itl_p95, "total_output_tps": 100.0},
        "per_request": {"itl_gaps_s": [itl_p95] * 8, "latency_s": [1.0] * 8},
    }
    return {"model": "m", "config": BenchConfig().to_dict(), "levels": [level]}


def _record(history: History, itl_p95: float, settings: dict[str, Any]) -> Run:
    launch = history.record_launch(glm_plan(settings), settings)
    return history.record_bench(_bench(itl_p95), launch=launch)


def _verdict(text: str) -> str:
    """The verdict of c8 ITL p95 in a text table or a Markdown report."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("| ").split("|")] if "|" in line else None
        if cells and cells[:2] == ["8", "ITL p95"]:
            return f"{cells[-2]} {cells[-1]}"
        # The text table's `8`, the cockpit's `c8` (its table fits 80 columns).
        m = re.match(r"\s*c?8\s+ITL p95\s.*\s(\S+%)\s+(within noise|better|worse)$", line.rstrip())
        if m:
            return f"{m.group(1).replace('%', ' %')} {m.group(2)}"
    raise AssertionError(f"no c8 ITL p95 row in:\n{text}")


def test_compare_export_and_the_cockpit_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = History()
    # Two earlier benchmarks of the baseline's settings that disagree by 40 %: the
    # baseline's repeats make a 5 % move noise.
    _record(history, 0.050, {})
    _record(history, 0.070, {})
    base = _record(history, 0.060, {})
    run = _record(history, 0.063, {"max_num_seqs": 4})

    assert cli.main(["history", "compare", base.id, run.id]) == 0
    compared = _verdict(capsys.readouterr().out)

    out = tmp_path / "export"
    assert cli.main(["history", "export", base.id, run.id, "--out", str(out)]) == 0
    capsys.readouterr()
    exported = _verdict((out / "report.md").read_text(encoding="utf-8"))

    history.pin_baseline(base.id)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(describe_run(RunHistory(history), run.id))
    cockpit = _verdict(console.export_text())

    assert compared == exported == cockpit
    assert compared.endswith("within noise"), compared

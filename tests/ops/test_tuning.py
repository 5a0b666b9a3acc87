"""One setting at a time on the SIMULATED engine: max_num_seqs 2 -> 8, measured and compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ops_helpers import FAKE_API_KEY, FAKE_HF_TOKEN, files_containing, glm_plan
from ops_simengine import SimCluster

from spark_tui import cli
from spark_tui.ops.bench import BenchConfig
from spark_tui.ops.history import History
from spark_tui.ops.tuning import measure, ranks_carry, relaunch_with_change


async def test_raising_max_num_seqs_shows_higher_throughput_at_concurrency_8(
    tmp_path: Path, private_data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = History()
    cluster = SimCluster(glm_plan, tmp_path / "sim")
    config = BenchConfig(
        concurrency=(8,), prompt_tokens=32, output_tokens=24, requests_per_level=16
    )
    try:
        base = await measure(
            {"max_num_seqs": 2},
            launch=cluster.launch,
            history=history,
            bench_config=config,
            expect_reasoning=True,
            tool_call_parser="glm47",
        )
        assert base.smoke_ok and base.bench is not None
        assert history.baseline_for("glm-5.3-flash", base.launch.cluster_key).id == base.bench.id
        step = await relaunch_with_change(
            "max_num_seqs",
            8,
            base_overrides={"max_num_seqs": 2},
            launch=cluster.launch,
            stop=cluster.stop,
            history=history,
            recipe="glm-5.3-flash",
            cluster_key=base.launch.cluster_key,
            expect_reasoning=True,
            tool_call_parser="glm47",
        )
    finally:
        await cluster.stop()
    # The change reached every rank, and only it changed.
    assert all(r[r.index("--max-num-seqs") + 1] == "8" for r in cluster.argvs[-1])
    assert ranks_carry({"ranks": step.launch.commands}, "max_num_seqs", 8) == []
    assert ranks_carry({"ranks": base.launch.commands}, "max_num_seqs", 8) == [0, 1]
    assert step.launch.changed == [{"name": "max_num_seqs", "before": 2, "after": 8}]
    assert step.bench is not None and step.bench.changed == step.launch.changed
    assert step.smoke_ok
    cmp = step.comparison
    assert cmp is not None and cmp.changed == [{"name": "max_num_seqs", "before": 2, "after": 8}]
    tps = cmp.get(8, "total_output_tps")
    assert tps is not None and tps.delta is not None and tps.delta > 0
    assert tps.beyond_noise and tps.better, tps
    # The CLI shows the same comparison and exports a secret-free script and report.
    assert cli.main(["history", "compare", base.bench.id, step.bench.id]) == 0
    shown = capsys.readouterr().out
    assert "changed: max_num_seqs: 2 -> 8" in shown and "total tok/s" in shown
    assert cli.main(["history", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in listed] == ["launch", "smoke", "bench"] * 2
    out = tmp_path / "export"
    assert cli.main(["history", "export", base.bench.id, step.bench.id, "--out", str(out)]) == 0
    capsys.readouterr()
    script = (out / f"launch-{step.launch.id}.sh").read_text()
    assert "--max-num-seqs 8" in script and '"${HF_TOKEN:-}"' in script
    report = (out / "report.md").read_text()
    assert "max_num_seqs: 2 -> 8" in report
    for secret in (FAKE_HF_TOKEN, FAKE_API_KEY):
        assert files_containing(private_data_dir, secret) == []
        assert files_containing(out, secret) == []

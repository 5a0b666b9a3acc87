"""Tuning compares like with like: the baseline is measured with the same benchmark
settings, picked or reset by the user, and runs measured differently are never judged."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from ops_helpers import glm_plan

from spark_tui import cli
from spark_tui.commands.arguments.common import BENCH_DEFAULTS
from spark_tui.core.workload import Workload
from spark_tui.ops.bench import BenchConfig
from spark_tui.ops.compare import compare_bench
from spark_tui.ops.history import History
from spark_tui.service.tune import pick_baseline


def bench_dict(config: BenchConfig, tps: float) -> dict[str, Any]:
    per = {"latency_s": [1.0, 1.01, 0.99, 1.0], "ttft_s": [0.1, 0.1, 0.1, 0.1]}
    level = {
        "concurrency": 1,
        "requests": 4,
        "errors": 0,
        "figures": {"total_output_tps": tps, "ttft_p50_s": 0.1},
        "per_request": per,
    }
    return {"base_url": "http://x", "model": "m", "config": config.to_dict(), "levels": [level]}


def record(history: History, config: BenchConfig, tps: float, settings: dict[str, Any]) -> Any:
    launch = history.record_launch(glm_plan(settings), settings)
    return launch, history.record_bench(bench_dict(config, tps), launch=launch)


def test_a_baseline_measured_with_other_benchmark_settings_is_not_used() -> None:
    history = History()
    cockpit_then = BenchConfig(
        workload=Workload(output_tokens=64)
    )  # another session, other settings
    launch, first = record(history, cockpit_then, 100.0, {})
    now = BenchConfig()
    key, shash = launch.cluster_key, launch.settings_hash
    # The first benchmark of the recipe on the cluster was measured differently: not it.
    assert pick_baseline(history, "glm-5.3-flash", key, shash, now) is None
    _, same = record(history, now, 110.0, {})
    assert pick_baseline(history, "glm-5.3-flash", key, shash, now).id == same.id
    # Other settings running now: their own benchmark is the baseline, not this one.
    other = glm_plan({"max_num_seqs": 8}).settings_hash
    assert pick_baseline(history, "glm-5.3-flash", key, other, now) is None
    # A fresh baseline when asked, whatever was measured.
    assert pick_baseline(history, "glm-5.3-flash", key, shash, now, new_baseline=True) is None
    assert first.id != same.id


def test_the_user_picks_or_resets_the_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    history = History()
    launch, first = record(history, BenchConfig(), 100.0, {})
    _, second = record(history, BenchConfig(), 120.0, {})
    key, shash = launch.cluster_key, launch.settings_hash
    assert pick_baseline(history, "glm-5.3-flash", key, shash, BenchConfig()).id == second.id
    assert cli.main(["history", "baseline", first.id]) == 0
    assert "is the baseline of glm-5.3-flash" in capsys.readouterr().out
    assert pick_baseline(history, "glm-5.3-flash", key, shash, BenchConfig()).id == first.id
    # --baseline on one tuning step wins over the picked one
    chosen = pick_baseline(history, "glm-5.3-flash", key, shash, BenchConfig(), chosen=second.id)
    assert chosen.id == second.id
    assert cli.main(["history", "baseline", "--reset", "glm-5.3-flash"]) == 0
    assert "baseline reset" in capsys.readouterr().out
    assert history.pinned_baseline("glm-5.3-flash", key) is None
    assert pick_baseline(history, "glm-5.3-flash", key, shash, BenchConfig()).id == second.id


def test_benchmarks_with_other_settings_are_shown_but_not_judged() -> None:
    history = History()
    _, a = record(history, BenchConfig(workload=Workload(output_tokens=64)), 100.0, {})
    _, b = record(
        history, BenchConfig(workload=Workload(output_tokens=128)), 200.0, {"max_num_seqs": 8}
    )
    cmp = compare_bench(a, b)
    assert not cmp.comparable
    assert any("output_tokens (64 vs 128)" in n and "not like for like" in n for n in cmp.notes)
    tps = cmp.get(1, "total_output_tps")
    assert tps is not None and tps.verdict == "not comparable" and tps.better is None
    assert "not comparable" in cmp.to_text()
    # The same settings are judged as before.
    _, c = record(
        history, BenchConfig(workload=Workload(output_tokens=64)), 200.0, {"max_num_seqs": 8}
    )
    same = compare_bench(a, c)
    assert same.comparable and same.get(1, "total_output_tps").verdict == "better"


def test_the_cockpit_and_the_cli_benchmark_with_the_same_settings(tmp_path: Path) -> None:
    from spark_tui.service.session import Session

    parser = cli.build_parser()
    args = parser.parse_args(["bench", "--base-url", "http://127.0.0.1:1"])
    from spark_tui.commands.bench import bench_config

    assert bench_config(args) == BenchConfig()
    assert Session([]).bench_config == BenchConfig()
    # every field the CLI leaves at its default is the BenchConfig default
    assert copy.copy(BENCH_DEFAULTS) == {
        "concurrency": ",".join(map(str, BenchConfig().concurrency)),
        "prompt_tokens": BenchConfig().workload.prompt_tokens.spec(),
        "output_tokens": BenchConfig().workload.output_tokens.spec(),
    }

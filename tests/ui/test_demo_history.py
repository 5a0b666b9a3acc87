"""The demo's runs stay out of the user's history and baselines, and say they are simulated."""

from __future__ import annotations

from typing import Any

from spark_tui import cli
from spark_tui.service.history import History, HistoryRow
from spark_tui.ui.demo_session import DemoSession

PLAN = {
    "recipe": "glm-5.3-flash",
    "cluster_id": "st-demo",
    "settings": {},
    "ranks": [{"rank": 0, "node": "spark-a", "address": "127.0.0.11", "argv": ["vllm"]}],
}


def test_demo_runs_are_kept_apart_and_marked(capsys: Any) -> None:
    real = History()
    demo = DemoSession().history
    assert demo.root != real.root and real.root not in demo.root.parents
    launch = demo.record_launch(PLAN, {}, ok=True)
    bench = demo.record_bench({"model": "m", "levels": []}, launch=launch)
    demo.pin_baseline(bench.id)
    assert launch.simulated and bench.simulated and real.list_runs() == []
    # The demo's cluster key is a loopback range the next demo or `spark-tui sim` reuses:
    # a real run on those addresses never meets the demo's baseline.
    assert real.pinned_baseline("glm-5.3-flash", launch.cluster_key) is None
    assert "(simulated)" in HistoryRow.of(launch).line()
    assert cli.main(["history"]) == 0
    assert "no runs recorded yet" in capsys.readouterr().out
    assert cli.main(["history", "--demo"]) == 0
    assert launch.id in capsys.readouterr().out

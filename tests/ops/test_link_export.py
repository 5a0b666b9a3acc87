"""A benchmark's link and memory figures kept in the history and written in the export."""

from __future__ import annotations

from pathlib import Path

from spark_tui.core.link import InterfaceCounters, LinkSummary, NodeReading, rates
from spark_tui.ops.bench import BenchConfig, BenchResult
from spark_tui.ops.export import export_runs
from spark_tui.ops.history import History

GIB = 1024**3


def _result() -> BenchResult:
    summary = LinkSummary()
    for node, iface in (("spark-a", "enp1s0f1np1"), ("spark-b", "enP2p1s0f1np1")):
        readings = [
            NodeReading(t, 128 * GIB, free * GIB, (InterfaceCounters(iface, rx, rx, 200000),))
            for t, rx, free in ((0.0, 0, 100), (1.0, 3 * 10**9, 60), (2.0, 4 * 10**9, 70))
        ]
        for a, b in zip(readings, readings[1:], strict=False):
            summary.add(node, b.mem_total, b.mem_available, rates(a, b))
    result = BenchResult("http://127.0.0.1:8000", "m", BenchConfig(concurrency=(4,)))
    result.link, result.memory = summary.links(), summary.memory()
    return result


def test_link_figures_survive_the_history_and_reach_the_report(
    private_data_dir: Path, tmp_path: Path
) -> None:
    history = History()
    run = history.record_bench(_result())
    kept = BenchResult.from_dict(history.get_run(run.id).results["bench"])
    assert [(f.node, f.interface) for f in kept.link] == [
        ("spark-a", "enp1s0f1np1"),
        ("spark-b", "enP2p1s0f1np1"),
    ]
    assert kept.link[0].rx_peak_gbs == 3.0 and kept.link[0].tx_mean_gbs == 2.0
    assert kept.memory[1].min_available == 60 * GIB

    export_runs(history, [run.id], tmp_path / "export")
    report = (tmp_path / "export" / "report.md").read_text()
    assert "| node | interface | rx peak GB/s |" in report
    # 3 GB/s peak each way over a 25 GB/s link: 12 % of it.
    assert "| spark-a | enp1s0f1np1 | 3 | 2 | 3 | 2 | 12% | 25 | 2 |" in report
    assert "| spark-b | 60.0 | 128.0 |" in report


def test_history_show_names_the_link_figures(private_data_dir: Path) -> None:
    from spark_tui.service.history import RunHistory

    history = RunHistory(History())
    run = history.store.record_bench(_result())
    lines = history.show(run.id).lines()
    assert "link spark-a enp1s0f1np1: peak rx 3.00 tx 3.00 GB/s, 12% of the link" in lines
    assert "least free memory: spark-a 60.0 GiB, spark-b 60.0 GiB" in lines

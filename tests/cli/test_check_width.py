"""`check`'s per-node memory table fits an 80-column terminal (the cockpit's users' size, often
over SSH): a wrapped table is read row into row."""

from __future__ import annotations

from spark_tui.commands.check import render_report
from spark_tui.core.fit import check_fit
from tests.unit.test_fit import argv, llama70b, node, recipe


def test_the_memory_table_fits_80_columns_with_spark_names() -> None:
    nodes = [node("sim-spark-1"), node("sim-spark-2")]
    report = check_fit(recipe(), argv("-tp 2 --max-model-len 131072"), {}, nodes, llama70b())
    lines = render_report(report, "llama-3.3-70b-instruct-tp2", "m").splitlines()
    table = lines[lines.index("") + 1 : lines.index("") + 5]
    assert table[0].split() == [
        "node", "memory", "budget", "weights", "runtime", "KV", "KV/req", "KV", "tokens",
        "conc", "headroom",
    ]  # fmt: skip
    assert table[2].startswith("sim-spark-1 ") and "x" in table[2]
    assert all(len(line) <= 80 for line in table), "\n".join(table)

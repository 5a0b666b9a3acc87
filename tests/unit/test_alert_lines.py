"""An alert shows the start of a long log line (vLLM logs its config as one line of several
KB) and says how much it left out; the CLI's watch and the cockpit's panel both do."""

from __future__ import annotations

from spark_tui.commands.watch import render
from spark_tui.ops.events import ALERT_LINE_CHARS, WatchAlert, alert_line

DUMP = "(EngineCore pid=88) INFO Initializing a V1 LLM engine with config: " + "x=1, " * 900


def test_a_short_line_is_shown_whole_and_stripped() -> None:
    assert alert_line("  RuntimeError: boom \n") == "RuntimeError: boom"


def test_a_long_line_is_cut_saying_how_much_is_left_out() -> None:
    shown = alert_line(DUMP)
    left = len(DUMP.strip()) - ALERT_LINE_CHARS
    assert shown == f"{DUMP.strip()[:ALERT_LINE_CHARS]}… ({left} more characters)"


def test_the_cli_watch_cuts_the_alerts_lines_and_the_heads() -> None:
    alert = WatchAlert(1, "spark-b", "was killed (exit code 137)", (DUMP, "bye"), (DUMP,))
    out = render(alert)
    assert out[0] == "FAILED: rank 1 on spark-b was killed (exit code 137)"
    assert all(len(line) < ALERT_LINE_CHARS + 40 for line in out)
    assert out[1].startswith("  | (EngineCore pid=88)") and out[1].endswith("more characters)")
    assert out[2] == "  | bye" and "  the head says:" in out

"""Ctrl+C during `tune --sweep`: the rows so far are said, with how to resume, and what is
left running is the user's choice (`--on-interrupt` without a terminal); the command then
exits 130 as every interrupted command does (a plain tune's: tests/cli/test_tune_interrupt.py)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

_SCRIPT = r"""
import asyncio, sys
from spark_tui import cli
from spark_tui.core.sweep import Objective
from spark_tui.core.sweep_result import MEASURED, SweepResult, SweepRow
from spark_tui.service import events as ev


class SweepingSession:
    '''Stands in for the Session: a sweep that measured its first value and hangs on the
    second (as a benchmark would), and records what `leave_after_sweep` is asked.'''

    async def sweep(self, recipe, setting, values, targets, objective, **kw):
        result = SweepResult(
            recipe=recipe.name, setting=setting, raws=list(values), values=[2, 8],
            targets=list(targets), objective=objective or Objective(), overrides={},
        )
        kw["on_result"](result)
        levels = {2: {"total_output_tps": 40.0, "errors": 0.0}}
        result.rows.append(SweepRow(2, "2", MEASURED, levels=levels, bench_id="b2"))
        yield ev.SweepValueDone(result, 2)
        yield ev.SweepProgressed(1, 2, 8, "bench", 30.0)
        await asyncio.sleep(60)

    async def leave_after_sweep(self, recipe, result, choice):
        print(f"left {choice} running, best {result.best().value}", flush=True)
        yield ev.Notice("info", f"{choice} is running")

    async def close(self):
        print("closed", flush=True)


import spark_tui.commands.terminal as terminal
terminal.session = lambda *a, **kw: SweepingSession()
sys.exit(cli.main(sys.argv[1:]))
"""

ARGS = ["tune", "glm-5.3-flash", "--hosts", "spark-a,spark-b", "--sweep", "max_num_seqs=2,8"]


def _interrupted(
    script: str, args: list[str], marker: str
) -> tuple[subprocess.Popen[str], str, str]:
    """Run the CLI through `script`, send SIGINT once stderr has said `marker`; the process
    (ended) and what it printed after."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    while not any(marker in line for line in seen):
        line = proc.stderr.readline()
        assert line, seen
        seen.append(line)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc, out, err


@pytest.mark.parametrize("choice", ["best", "nothing"])
def test_ctrl_c_leaves_what_the_user_chose_and_says_how_to_resume(choice: str) -> None:
    proc, out, err = _interrupted(_SCRIPT, [*ARGS, "--on-interrupt", choice], "value 8: bench")
    assert proc.returncode == 130, err
    assert f"left {choice} running, best 2" in out and "closed" in out
    # The command to resume is the one typed: the same nodes (and targets, and benchmark).
    typed = " ".join([*ARGS, "--on-interrupt", choice])
    assert f"resume with: spark-tui {typed} --resume\n" in err and "(interrupted)" in err
    assert "Traceback" not in err

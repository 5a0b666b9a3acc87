"""Ctrl+C during a plain tune's relaunch, once it stopped the running cluster: without a
terminal the settings it replaced are relaunched (the service as it was), `--on-interrupt
nothing` leaves nothing and says the launch that brings it back; either way the command
exits 130. A relaunch that failed with nothing brought back says that launch too."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

_TUNE_SCRIPT = r"""
import asyncio, sys
from spark_tui import cli
from spark_tui.service import events as ev


class TuningSession:
    '''Stands in for the Session: a tune that stopped the running cluster to relaunch it and
    hangs in the relaunch (as a loading engine would); records what it is asked to restore.'''

    cluster = None

    async def tune(self, recipe, setting, value, **kw):
        print(f"keep_failed={kw['keep_failed']}", flush=True)
        yield ev.Stopped("c0ffee00", [("spark-a", "spark-tui-c0ffee00-r0")])
        yield ev.TuneReplaced("c0ffee00", recipe.name, {"max_num_seqs": "4"}, "max_num_seqs=8")
        print("relaunching", file=sys.stderr, flush=True)
        await asyncio.sleep(60)

    async def restore_after_tune(self, recipe, replaced, reason):
        print(f"restoring {replaced.overrides} of {replaced.cluster_id}: {reason}", flush=True)
        yield ev.TuneRestored(replaced.cluster_id, replaced.change, reason)

    async def close(self):
        print("closed", flush=True)


import spark_tui.commands.terminal as terminal
terminal.session = lambda *a, **kw: TuningSession()
sys.exit(cli.main(sys.argv[1:]))
"""

ARGS = ["tune", "glm-5.3-flash", "--hosts", "spark-a,spark-b", "--set", "max_num_seqs=8"]
AGAIN = "`spark-tui launch glm-5.3-flash --wait --set max_num_seqs=4 --hosts spark-a,spark-b`"


def _interrupted(args: list[str], marker: str) -> tuple[int, str, str]:
    """Run the CLI through the script, send SIGINT once stderr has said `marker`; its exit
    code and what it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _TUNE_SCRIPT, *args],
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
    return proc.returncode, out, "".join(seen) + err


def test_ctrl_c_without_a_terminal_relaunches_the_settings_it_replaced() -> None:
    code, out, err = _interrupted(ARGS, "relaunching")
    assert code == 130, err
    assert "restoring {'max_num_seqs': '4'} of c0ffee00: interrupted" in out, out
    assert "closed" in out
    assert "cluster c0ffee00 runs the settings it ran with before max_num_seqs=8 again" in err
    assert "Traceback" not in err


def test_ctrl_c_with_on_interrupt_nothing_says_the_service_is_gone_and_how_back() -> None:
    code, out, err = _interrupted([*ARGS, "--on-interrupt", "nothing"], "relaunching")
    assert code == 130, err
    assert "restoring" not in out
    assert "stopped cluster c0ffee00 to relaunch it with max_num_seqs=8" in err, err
    assert AGAIN in err, err
    assert "Traceback" not in err


def test_keep_failed_reaches_the_tune_and_best_is_for_sweeps() -> None:
    code, out, err = _interrupted([*ARGS, "--keep-failed"], "relaunching")
    assert code == 130 and "keep_failed=True" in out, err
    res = subprocess.run(
        [sys.executable, "-c", _TUNE_SCRIPT, *ARGS, "--on-interrupt", "best"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "--on-interrupt best goes with --sweep" in res.stderr


@pytest.mark.parametrize("restored", [False, True])
def test_a_failed_relaunch_says_the_launch_that_brings_it_back_unless_it_is_back(
    restored: bool,
) -> None:
    back = (
        "        yield ev.TuneRestored('c0ffee00', 'max_num_seqs=8', 'rank 1 exited')\n"
        if restored
        else ""
    )
    failing = _TUNE_SCRIPT.replace(
        "        await asyncio.sleep(60)\n",
        back + "        from spark_tui.core.errors import OperationFailed\n"
        "        raise OperationFailed('rank 1 exited with code 1', 'read the lines above')\n",
    )
    res = subprocess.run(
        [sys.executable, "-c", failing, *ARGS],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1, res.stderr
    remedy = res.stderr.splitlines()[-1]
    assert remedy.startswith("  remedy: read the lines above")
    assert (AGAIN in remedy) is not restored, remedy

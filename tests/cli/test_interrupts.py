"""The headless commands' signal handling (commands.interrupts): SIGINT, SIGTERM and
SIGHUP end a command through its finally blocks; a second signal does not cut the
clean-up short, a third abandons it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

_SCRIPT = r"""
import asyncio, sys
from spark_tui.commands.interrupts import CommandInterrupted, run_command

async def main():
    try:
        print("ready", flush=True)
        await asyncio.sleep(60)
    finally:
        print("cleanup starts", flush=True)
        await asyncio.sleep(1.5)
        print("cleaned", flush=True)

try:
    run_command(main)
except CommandInterrupted as exc:
    sys.exit(exc.exit_code)
"""


def _run(signals: list[int], wait_for: str = "ready") -> tuple[int, str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    out = [proc.stdout.readline()]
    assert out[0].strip() == wait_for, out
    proc.send_signal(signals[0])
    if len(signals) > 1:
        out.append(proc.stdout.readline())
        assert out[-1].strip() == "cleanup starts", out
        for sig in signals[1:]:
            time.sleep(0.1)
            proc.send_signal(sig)
    rest, err = proc.communicate(timeout=30)
    return proc.returncode, "".join(out) + rest, err


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["int", "term", "hup"]
)
def test_a_signal_runs_the_clean_up_and_exits_128_plus_its_number(sig: int) -> None:
    code, out, err = _run([sig])
    assert code == 128 + sig, err
    assert "cleaned" in out, "the finally block ran to its end"
    assert "Traceback" not in err


def test_a_second_signal_does_not_cut_the_clean_up_short() -> None:
    code, out, err = _run([signal.SIGINT, signal.SIGINT])
    assert code == 130
    assert "cleaned" in out
    assert "still cleaning up" in err


def test_a_third_signal_abandons_the_clean_up() -> None:
    code, out, err = _run([signal.SIGINT, signal.SIGINT, signal.SIGINT])
    assert code == 130
    assert "cleaned" not in out

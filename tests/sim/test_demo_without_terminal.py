"""`spark-tui demo` and the cockpit without a terminal: a message with a remedy, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def run_without_terminal(*args: str, tmp_path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SPARK_TUI_DATA_DIR": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    return subprocess.run(
        [sys.executable, "-m", "spark_tui", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "command"),
    [(("demo",), "spark-tui demo"), (("--hosts", "spark-a,spark-b"), "spark-tui")],
)
def test_no_terminal_says_so_with_a_remedy_and_exits_2(args, command, tmp_path) -> None:
    done = run_without_terminal(*args, tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"`{command}` needs a terminal" in done.stderr
    assert "stdin and stdout are not one" in done.stderr
    assert "remedy: run it in a terminal" in done.stderr
    assert "Traceback" not in done.stderr
    # Nothing was drawn: no escape sequences went to the pipe.
    assert "\x1b" not in done.stdout


def test_demo_with_only_stdin_redirected_names_stdin(tmp_path) -> None:
    # stdout is a pipe here too; with a pseudo-terminal on stdout only stdin would be named.
    import pty

    leader, follower = pty.openpty()
    try:
        env = {**os.environ, "SPARK_TUI_DATA_DIR": str(tmp_path / "d")}
        done = subprocess.run(
            [sys.executable, "-m", "spark_tui", "demo"],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 2
    assert "but stdin is not one" in done.stderr

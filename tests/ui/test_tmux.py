"""`spark-tui demo` in a real terminal (tmux): keys in, screen out, and nothing left behind."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.procs import descendants, running

if shutil.which("tmux") is None and os.environ.get("CI"):
    raise RuntimeError("tmux is not installed: CI must run the terminal test (.ci/run installs it)")
pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (CI installs it)"
)


class Tmux:
    """A private tmux server (its own socket) running one session."""

    def __init__(self, name: str) -> None:
        self.name = name

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.name, *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=10,
        )

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name).stdout

    def alive(self) -> bool:
        return self.run("has-session", "-t", self.name, check=False).returncode == 0

    def wait_for(self, condition: Callable[[str], bool], timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if condition(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")
            time.sleep(0.2)


def kill_left(pane_pid: int) -> None:
    """After a failed test: end what this test started (by pid) so nothing leaks."""
    if not pane_pid:
        return
    for pid in descendants(pane_pid) | {pane_pid}:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def assert_demo_runs_on_this_python_in_a_terminal(pane_pid: int) -> None:
    """The pane runs the demo with this interpreter (the venv's, so its Python version),
    its stdin and stdout on the pane's pseudo-terminal."""
    found: dict[int, tuple[str, int]] = {}  # pid -> (interpreter, parent pid)
    for pid in {pane_pid} | descendants(pane_pid):
        try:
            argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:  # ended since it was listed
            continue
        if argv[1:4] == ["-m", "spark_tui", "demo"]:
            found[pid] = (argv[0], int(stat.rsplit(")", 1)[1].split()[1]))
    # A child the demo is forking (a simulated node's command, an engine) carries the demo's
    # command line until it execs: the demo is the one whose parent is not a demo.
    demos = [(pid, python) for pid, (python, parent) in found.items() if parent not in found]
    assert len(demos) == 1, found
    pid, python = demos[0]
    assert python == sys.executable
    for fd in (0, 1):
        assert os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/dev/pts/"), fd


def test_demo_in_tmux_reaches_ready_passes_smoke_and_quits_clean(tmp_path: Path) -> None:
    tmux = Tmux(f"spark-tui-test-{os.getpid()}")
    env = {
        "SPARK_SIM_PACE": "0.05",
        "SPARK_SIM_TOKEN_SCALE": "0.05",
        "SPARK_TUI_DATA_DIR": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TERM": "xterm-256color",
    }
    command = " ".join(
        ["env", *(f"{k}={shlex.quote(v)}" for k, v in env.items())]
        + [shlex.quote(sys.executable), "-m", "spark_tui", "demo"]
    )
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", "120", "-y", "40", command)
    pane_pid = 0
    try:
        pane_pid = int(tmux.run("display", "-p", "-t", tmux.name, "#{pane_pid}").stdout)
        tmux.wait_for(lambda s: "2 of 2 nodes reachable" in s, 30, "discovery")
        assert_demo_runs_on_this_python_in_a_terminal(pane_pid)
        tmux.run("send-keys", "-t", tmux.name, "l")
        screen = tmux.wait_for(
            lambda s: "cluster" in s and "ready (t smoke" in s, 90, "both ranks ready"
        )
        heads = [line for line in screen.splitlines() if "rank 0" in line or "rank 1" in line]
        assert any("rank 0" in h and "ready" in h for h in heads), screen
        assert any("rank 1" in h and "ready" in h for h in heads), screen
        procs = descendants(pane_pid) | {pane_pid}
        assert len(procs) >= 3  # the cockpit and an engine per rank
        tmux.run("send-keys", "-t", tmux.name, "t")
        screen = tmux.wait_for(lambda s: "smoke checks passed" in s, 60, "smoke checks")
        assert "smoke checks passed (5/5)" in screen
        for check in ("health", "models", "chat", "tool", "stream"):
            assert check in screen, check
        assert "✗" not in screen
        # quit: the demo asks, then stops its cluster and its simulated Sparks
        tmux.run("send-keys", "-t", tmux.name, "q")
        tmux.wait_for(lambda s: "Quit the demo" in s, 10, "the quit dialog")
        tmux.run("send-keys", "-t", tmux.name, "y")
        deadline = time.monotonic() + 30
        while tmux.alive() or any(running(p) for p in procs):
            if time.monotonic() > deadline:
                left = sorted(p for p in procs if running(p))
                raise AssertionError(f"still running after quit: {left}")
            time.sleep(0.2)
    finally:
        tmux.run("kill-server", check=False)
        kill_left(pane_pid)


def test_demo_ends_clean_when_its_terminal_goes_away(tmp_path: Path) -> None:
    tmux = Tmux(f"spark-tui-hup-{os.getpid()}")
    env = {
        "SPARK_SIM_PACE": "0.05",
        "SPARK_SIM_TOKEN_SCALE": "0.05",
        "SPARK_TUI_DATA_DIR": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    command = " ".join(
        ["env", *(f"{k}={shlex.quote(v)}" for k, v in env.items())]
        + [shlex.quote(sys.executable), "-m", "spark_tui", "demo"]
    )
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", "80", "-y", "24", command)
    pane_pid = 0
    try:
        pane_pid = int(tmux.run("display", "-p", "-t", tmux.name, "#{pane_pid}").stdout)
        tmux.wait_for(lambda s: "2 of 2 nodes reachable" in s, 30, "discovery")
        tmux.run("send-keys", "-t", tmux.name, "l")
        tmux.wait_for(lambda s: "ready (t smoke" in s, 90, "ready")
        procs = descendants(pane_pid) | {pane_pid}
        assert len(procs) >= 3
        tmux.run("kill-server")  # the terminal goes away: SIGHUP
        deadline = time.monotonic() + 20
        while any(running(p) for p in procs):
            if time.monotonic() > deadline:
                raise AssertionError(f"left running: {sorted(p for p in procs if running(p))}")
            time.sleep(0.1)
    finally:
        tmux.run("kill-server", check=False)
        kill_left(pane_pid)

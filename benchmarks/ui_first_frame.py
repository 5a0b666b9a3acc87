"""Time to first frame: `spark-tui demo` against a minimal Textual app, in the same run.

Each program runs in a pseudo-terminal; the clock stops when its first frame (a marker
string) reaches the terminal. Two figures per run: the wall-clock time, and the CPU time the
program (all its threads) had used when it wrote that frame, which a few lines run before
the program itself note down (the same lines for both programs). On a machine busy with
other work the wall-clock times stretch with the load; the CPU times stay close to an idle
machine's, so their ratio is the steadier one. Prints the medians and their ratios;
asserts nothing.

Both programs run from a fresh copy of this checkout (spark_tui/, recipes/, no
`__pycache__`) in a temporary folder, in two cases:
- cold: no .pyc of spark-tui anywhere (PYTHONDONTWRITEBYTECODE=1, nothing cached), so every
  spark-tui module the first frame imports is compiled at every start, as in a fresh
  checkout or an editable install that may not write its .pyc files;
- warm: compiled once, as `pip install` does: a warm-up run of each program writes what it
  imports into a private cache (PYTHONPYCACHEPREFIX), which the measured runs read.
Installed dependencies (Textual, Rich, PyYAML) keep their own .pyc in both cases, for both
programs. The runs alternate (minimal, demo; cold, warm) so that a busy machine weighs on
every figure alike.
Usage: python benchmarks/ui_first_frame.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
BUDGET = 1.5

MINIMAL = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class M(App):\n"
    "    def compose(self):\n"
    "        yield Static('minimal-first-frame')\n"
    "M().run()\n"
)
DEMO = (
    "import runpy, sys\n"
    "sys.argv = ['spark-tui', 'demo']\n"
    "runpy.run_module('spark_tui', run_name='__main__', alter_sys=True)\n"
)
# Run before each program: notes the process's CPU time when the frame holding the marker
# is written to the terminal.
NOTE_CPU = """
import os, time
from textual.drivers.linux_driver import LinuxDriver
_write, _note = LinuxDriver.write, os.environ.pop("FIRST_FRAME_CPU_FILE")
def _noting(self, data):
    if {marker!r} in data and not os.path.exists(_note):
        with open(_note, "w") as f:
            f.write(repr(time.process_time()))
    return _write(self, data)
LinuxDriver.write = _noting
"""
PROGRAMS = {"minimal": (MINIMAL, "minimal-first-frame"), "demo": (DEMO, "simulated")}


def first_frame(
    code: str, marker: str, env: dict[str, str], cwd: str, timeout: float = 90.0
) -> tuple[float, float]:
    """(wall-clock, CPU) seconds from start until `marker` reaches the pseudo-terminal."""
    note = Path(cwd) / "first-frame-cpu"
    note.unlink(missing_ok=True)
    argv = [sys.executable, "-c", NOTE_CPU.format(marker=marker) + code]
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.chdir(cwd)
        os.execve(argv[0], argv, {**env, "FIRST_FRAME_CPU_FILE": str(note)})
    seen = b""
    try:
        while time.perf_counter() - start < timeout:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            seen += chunk
            if marker.encode() in seen:
                wall = time.perf_counter() - start
                while not note.exists() and time.perf_counter() - start < timeout:
                    time.sleep(0.01)
                return wall, float(note.read_text())
        raise RuntimeError(f"no first frame from {code.splitlines()[-1]!r} within {timeout}s")
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + 10
        while time.time() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)


def fresh_copy(into: Path) -> None:
    """The checkout's package and bundled files, without any compiled module."""
    for name in ("spark_tui", "recipes"):
        shutil.copytree(
            CHECKOUT / name, into / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )


def environments(copy: Path) -> dict[str, dict[str, str]]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONPATH")
    }
    base.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
    base["PYTHONPATH"] = str(copy)
    return {
        "cold": {**base, "PYTHONDONTWRITEBYTECODE": "1"},
        "warm": {**base, "PYTHONPYCACHEPREFIX": str(copy / "pycache")},
    }


def report(case: str, times: dict[str, list[tuple[float, float]]]) -> None:
    print(f"[{case}]")
    for i, what in enumerate(("wall-clock", "CPU")):
        medians = {k: statistics.median(run[i] for run in v) for k, v in times.items()}
        for key, label in (("minimal", "minimal Textual app"), ("demo", "spark-tui demo")):
            runs = ", ".join(f"{run[i]:.3f}" for run in times[key])
            print(f"  {label:20s} {what:10s} median {medians[key]:.3f} s  (runs: {runs})")
        ratio = medians["demo"] / medians["minimal"]
        verdict = "within" if ratio <= BUDGET else "OVER"
        print(f"  ratio demo/minimal, {what}: {ratio:.2f}x  ({verdict} the budget of {BUDGET}x)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spark-tui-first-frame-") as tmp:
        copy = Path(tmp)
        fresh_copy(copy)
        envs = environments(copy)
        # The warm case's one compile into its private cache (not measured).
        for code, marker in PROGRAMS.values():
            first_frame(code, marker, envs["warm"], tmp)
        times: dict[str, dict[str, list[tuple[float, float]]]] = {
            case: {name: [] for name in PROGRAMS} for case in envs
        }
        for _ in range(args.runs):
            for case, env in envs.items():
                for name, (code, marker) in PROGRAMS.items():
                    times[case][name].append(first_frame(code, marker, env, tmp))
        leftovers = [p.name for p in (copy / "spark_tui").rglob("__pycache__")]
        if leftovers:  # the cold case would not have been cold
            raise RuntimeError(f"compiled modules were written into the copy: {leftovers}")
    print(
        f"{args.runs} runs of each, alternating; python {sys.version.split()[0]}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    report("cold: spark-tui compiled at every start (fresh checkout, no .pyc)", times["cold"])
    report("warm: spark-tui compiled once (as pip install leaves it)", times["warm"])


if __name__ == "__main__":
    main()

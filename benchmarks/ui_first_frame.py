"""Time to first frame: `spark-tui demo` against a minimal Textual app, in the same run.

Each program runs in a pseudo-terminal; the clock stops when its first frame (a marker
string) reaches the terminal. Prints the medians and their ratio; asserts nothing.

Python caches compiled modules (.pyc); an installed wheel has them, an editable checkout
run with PYTHONDONTWRITEBYTECODE=1 compiles every spark-tui module at every start. Both
cases are measured: "installed" lets a warm-up run compile everything into a private cache
(PYTHONPYCACHEPREFIX: nothing is written to the checkout), "cold" compiles at each start.
Usage: python benchmarks/ui_first_frame.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import signal
import statistics
import sys
import time

MINIMAL = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class M(App):\n"
    "    def compose(self):\n"
    "        yield Static('minimal-first-frame')\n"
    "M().run()\n"
)


def first_frame(
    argv: list[str], marker: bytes, timeout: float = 60.0, env: dict[str, str] | None = None
) -> float:
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
        os.environ.update(env or {})
        os.execvp(argv[0], argv)
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
            if marker in seen:
                return time.perf_counter() - start
        raise RuntimeError(f"no first frame from {argv} within {timeout}s")
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


def measure(runs: int, env: dict[str, str], label: str) -> None:
    minimal, demo = [], []
    for _ in range(runs):
        minimal.append(
            first_frame([sys.executable, "-c", MINIMAL], b"minimal-first-frame", env=env)
        )
        demo.append(
            first_frame(
                [sys.executable, "-m", "spark_tui", "demo"], b"simulated", timeout=90, env=env
            )
        )
    m, d = statistics.median(minimal), statistics.median(demo)
    print(f"[{label}]")
    print(
        f"  minimal Textual app first frame: median {m:.3f} s  runs {[round(x, 3) for x in minimal]}"
    )
    print(
        f"  spark-tui demo first frame:      median {d:.3f} s  runs {[round(x, 3) for x in demo]}"
    )
    print(f"  ratio demo/minimal: {d / m:.2f}x  (budget: at most 1.5x)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="spark-tui-pyc-") as cache:
        # One warm-up run of each program writes every module it imports, compiled, into
        # the private cache; the measured runs then read them from there.
        env = {"PYTHONPYCACHEPREFIX": cache, "PYTHONDONTWRITEBYTECODE": ""}
        first_frame([sys.executable, "-c", MINIMAL], b"minimal-first-frame", env=env)
        first_frame([sys.executable, "-m", "spark_tui", "demo"], b"simulated", 90, env=env)
        measure(args.runs, env, "installed: modules compiled once, as pip install does")
    measure(args.runs, {}, "cold: no .pyc (PYTHONDONTWRITEBYTECODE checkout), compiled at start")


if __name__ == "__main__":
    main()

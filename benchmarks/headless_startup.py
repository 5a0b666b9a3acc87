"""Headless startup: `spark-tui plan RECIPE --facts FILE --json` (or `check`) against
`python -c "import yaml, pydantic"` (the budget is at most 2x), each in a fresh interpreter.

Prints the medians of several runs and their ratio, and which heavy modules (Textual,
asyncssh, Docker SDK) the plan run imported; asserts nothing. Bytecode is written (as on a
user's machine) whatever PYTHONDONTWRITEBYTECODE says; the first run of each is not timed.
Usage: python benchmarks/headless_startup.py [--runs 7] [--recipe glm-5.3-flash] [--command check]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spark_tui.core.facts import GIB, Interface, NodeFacts, facts_to_json

BASELINE = "import yaml, pydantic"
PLAN = (
    "import sys, spark_tui.cli as c; rc = c.main(sys.argv[1:]); "
    "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'asyncssh', 'docker'}); "
    "sys.stderr.write('HEAVY=' + ','.join(heavy) + '\\n'); sys.exit(rc)"
)


def facts(path: Path) -> None:
    nodes = [
        NodeFacts(
            name=f"spark-{c}",
            address=f"10.0.0.{i + 1}",
            home="/home/nvidia",
            memory_total_bytes=128 * GIB,
            memory_available_bytes=120 * GIB,
            interfaces=[
                Interface(f"enp1s0f{i}np{i}", f"rocep1s0f{i}", "up", f"192.168.100.{i + 10}")
            ],
        )
        for i, c in enumerate("ab")
    ]
    path.write_text(facts_to_json(nodes))


# A user's install has its bytecode (pip compiles it; an editable install writes it on the
# first run): with PYTHONDONTWRITEBYTECODE set, as on some CI machines, every run would
# compile spark-tui's sources again while the baseline's packages have theirs.
# Offline: `check` of a model no node caches would otherwise wait for the Hub's facts
# (network time, not startup); it then says what it cannot tell, as on an offline machine.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["HF_HUB_OFFLINE"] = "1"


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=ENV)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--recipe", default="glm-5.3-flash")
    parser.add_argument("--command", choices=("plan", "check"), default="plan")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        facts_path = Path(tmp) / "facts.json"
        facts(facts_path)
        plan_argv = [
            sys.executable,
            "-c",
            PLAN,
            args.command,
            args.recipe,
            "--facts",
            str(facts_path),
            "--json",
        ]
        base_argv = [sys.executable, "-c", BASELINE]
        timed(base_argv)  # warm the file cache for both before measuring
        _, first = timed(plan_argv)
        if first.returncode not in (0, 1):  # 1: check's "does not fit"
            print(f"{args.command} failed (exit {first.returncode}):\n{first.stderr}")
            return
        json.loads(first.stdout)
        base_times, plan_times = [], []
        for _ in range(args.runs):  # interleaved, so drift hits both alike
            base_times.append(timed(base_argv)[0])
            plan_times.append(timed(plan_argv)[0])
        heavy = first.stderr.rsplit("HEAVY=", 1)[-1].strip() or "none"
    base, plan = statistics.median(base_times), statistics.median(plan_times)
    print(f"python -c {BASELINE!r}: median {base * 1000:.0f} ms over {args.runs} runs")
    what = f"spark-tui {args.command} {args.recipe} --json"
    print(f"{what}: median {plan * 1000:.0f} ms over {args.runs} runs")
    print(f"ratio {args.command} / baseline: {plan / base:.2f} (budget: at most 2.00)")
    print(f"heavy modules imported by {args.command}: {heavy}")


if __name__ == "__main__":
    main()

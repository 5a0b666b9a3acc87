"""Fit-check accuracy against real vLLM logs: prints the figures, never fails a run.

    python benchmarks/fit_accuracy.py

Weight memory per rank (budget: within 5 %), KV tokens / concurrency / KV needed where the
logs give the inputs (budget: within 10 %), and, for the runtime-overhead calibration, the
"Available KV cache memory" predicted from the budget on GB10 logs (no budget: reported).
The sample parsing lives in tests/unit/test_fit_accuracy.py and is shared from there.
"""

from __future__ import annotations

import importlib.util
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_tui.core.facts import GIB  # noqa: E402
from spark_tui.core.fit import runtime_overhead_bytes  # noqa: E402
from spark_tui.core.serve_args import ServeArgs  # noqa: E402


def _samples() -> ModuleType:
    path = ROOT / "tests" / "unit" / "test_fit_accuracy.py"
    spec = importlib.util.spec_from_file_location("fit_accuracy_samples", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def _gb10_total_gib(s: ModuleType) -> float:
    # vLLM's own view of a GB10's memory, from the TP2 log's "Free memory on device (x/T GiB)".
    m = re.search(r"Free memory on device \([\d.]+/([\d.]+) GiB\)", s._text(s.HEAD_LOG))
    assert m
    return float(m.group(1))


def main() -> int:
    s = _samples()
    print("weight memory per rank (GiB): predicted from the log's checkpoint size")
    print(f"  {'sample':40} {'ckpt':>8} {'TPxPP':>5} {'pred':>8} {'logged':>8} {'error':>7}")
    for r in s.weight_rows():
        print(
            f"  {r.label:40} {r.checkpoint_gib:8.2f} {r.shards:5} {r.predicted_gib:8.2f} "
            f"{r.logged_gib:8.2f} {r.error:+7.1%}"
        )
    print("\nKV cache: predicted from the config and the log's inputs")
    for k in s.kv_rows():
        print(
            f"  {k.label:28} {k.quantity:26} pred {k.predicted:12.2f}  logged {k.logged:12.2f}"
            f"  {k.error:+7.2%}"
        )
    total = _gb10_total_gib(s)
    print(
        f"\navailable KV memory on GB10 (total {total} GiB as vLLM sees it): "
        "budget - predicted weights - runtime overhead"
    )
    for row in s.weight_rows():
        name = s.WEIGHT_LOGS.get(row.label)
        if name is None or "gb10" not in name and "multinode" not in name:
            continue
        text = s._text(name)
        args_seen = s.non_default_args(text) or s.non_default_args(s._text(s.HEAD_LOG))
        logged = s._AVAILABLE_KV.search(text)
        if logged is None:
            continue
        util = float(str(args_seen.get("gpu_memory_utilization", 0.92)))
        batched = args_seen.get("max_num_batched_tokens")
        args = ServeArgs(
            model="sample", max_num_batched_tokens=int(str(batched)) if batched else None
        )
        overhead = runtime_overhead_bytes(args) / GIB
        predicted = util * total - row.predicted_gib - overhead
        actual = float(logged.group(1))
        print(
            f"  {row.label:40} util {util:4.2f}  overhead {overhead:5.2f}  "
            f"pred {predicted:6.2f}  logged {actual:6.2f}  {predicted / actual - 1:+7.1%}"
        )
    check_startup()
    return 0


def _median_ms(cmd: list[str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False, cwd=ROOT)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def check_startup() -> None:
    """`spark-tui check --facts` against `import yaml, pydantic` (budget: at most 2x)."""
    facts = ROOT / "tests" / "fixtures" / "simulated_facts_glm53_2x128.json"
    base = _median_ms([sys.executable, "-c", "import yaml, pydantic"])
    check = _median_ms(
        [
            sys.executable,
            "-m",
            "spark_tui",
            "check",
            "glm-5.3-flash",
            "--facts",
            str(facts),
            "--json",
        ]
    )
    print(
        f"\nheadless check: {check:.0f} ms vs import yaml, pydantic {base:.0f} ms "
        f"(median of 5): ratio {check / base:.2f} (budget: at most 2.00)"
    )


if __name__ == "__main__":
    sys.exit(main())

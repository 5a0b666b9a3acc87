"""Fit-check accuracy against real vLLM logs: prints the figures, never fails a run.

    python benchmarks/fit_accuracy.py

Weight memory per rank (budget: within 5 %, 3 % on GB10), KV tokens / concurrency / KV
needed where the logs give the inputs (budget: within 10 %), and the "Available KV cache
memory" of every GB10 log predicted term by term (budget: within 5 %), and where the log
prints vLLM's own non-torch figure (measured host-wide on GB10, decided by no flag), the
prediction given it. Then the held-out GB10 logs (no constant was read from them), one row
each: weights (3 %), available KV (5 %) and KV tokens (2 %) predicted vs logged; a log held
given an input it prints says which.
The sample parsing lives in tests/unit/test_fit_accuracy.py and is shared from there.
"""

from __future__ import annotations

import importlib.util
import os
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


def _samples() -> ModuleType:
    path = ROOT / "tests" / "unit" / "test_fit_accuracy.py"
    spec = importlib.util.spec_from_file_location("fit_accuracy_samples", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


_GRAPH_ESTIMATE = re.compile(r"Estimated CUDA graph memory: ([\d.]+) GiB")
_PEAK = re.compile(
    r"Actual usage is (-?[\d.]+) GiB for consumed memory \(weights \+ non-torch\), "
    r"(-?[\d.]+) GiB for peak activation"
)


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
    print(
        "\navailable KV memory on GB10: util x total (the log's machine, as vLLM sees it) "
        "- predicted weights - runtime overhead (budget: within 5 %)"
    )
    print(
        f"  {'sample':38} {'util':>4} {'total':>6} {'weights':>7} {'n-torch':>7} {'compile':>7} "
        f"{'activ':>6} {'sampler':>7} {'graphs':>6} {'pred':>6} {'logged':>6} {'error':>7}"
        f"  {'vLLM n-torch':>12} {'given it':>8}"
    )
    for r in s.available_kv_rows():
        o = r.overhead
        print(
            f"  {r.label:38} {r.util:4.2f} {r.total_gib:6.2f} {r.weights_gib:7.2f} "
            f"{o.non_torch_bytes / GIB:7.2f} "
            f"{o.compile_bytes / GIB:7.2f} {o.activation_bytes / GIB:6.2f} "
            f"{o.sampler_bytes / GIB:7.2f} {o.cuda_graph_bytes / GIB:6.2f} "
            f"{r.predicted_gib:6.2f} {r.logged_gib:6.2f} {r.error:+7.1%}"
            + (
                f"  {r.non_torch_gib:12.2f} {r.error_given:+8.1%}"
                if r.error_given is not None and r.non_torch_gib is not None
                else ""
            )
        )
    print("\nwhat the logs print of the terms (GiB): CUDA graph estimate, peak activation")
    for label, name in s.WEIGHT_LOGS.items():
        if name not in s.gb10_kv_logs():
            continue
        text = s._text(name)
        graph = _GRAPH_ESTIMATE.search(text)
        peak = _PEAK.search(text)
        print(
            f"  {label:38} graphs {graph.group(1) if graph else '-':>5}  "
            f"peak activation {peak.group(2) if peak else '-':>5}  "
            f"weights + non-torch {peak.group(1) if peak else '-':>6}"
        )
    held_out(s)
    _reference_coverage(s)
    check_startup()
    return 0


def held_out(s: ModuleType) -> None:
    """The held-out logs: predicted / logged and the error of each figure."""
    print("\nheld-out GB10 logs (not fitted on): predicted / logged (error)")
    print(
        f"  {'log':44} {'vLLM':22} {'weights GiB':>22} {'available KV GiB':>22} {'KV tokens':>32}"
    )
    for r in s.held_out_rows():
        w, a, t = r.weights, r.available, r.tokens
        tokens = (
            f"{t.predicted:>11,.0f} / {t.logged:>11,.0f} ({t.error:+.1%})"
            if t is not None
            else f"not compared: {s.HELD_OUT[r.label].no_tokens}"
        )
        misses = dict(s.HELD_OUT[r.label].misses)
        flag = f"  known miss: {', '.join(misses)}" if misses else ""
        needs = dict(s.HELD_OUT[r.label].needs)
        if needs and a.error_given is not None:
            flag += (
                f"  held given vLLM's non-torch ({a.non_torch_gib:.2f} GiB): "
                f"{a.predicted_given_gib:.2f} ({a.error_given:+.1%})"
            )
        print(
            f"  {r.label:44} {r.version:22} {w.predicted_gib:6.2f} / {w.logged_gib:6.2f} "
            f"({w.error:+.1%}) {a.predicted_gib:6.2f} / {a.logged_gib:6.2f} ({a.error:+.1%}) "
            f"{tokens}{flag}"
        )


def _reference_coverage(s: ModuleType) -> None:
    """GB10 logs of the shared reference set that the fixtures (and so the test) lack."""
    for ref in (ROOT.parent / "shared" / "reference", ROOT.parent.parent / "shared" / "reference"):
        if ref.is_dir():
            break
    else:
        print("\nreference set not found next to the repository: coverage not checked")
        return
    fixtures = set(s.gb10_kv_logs())
    missing = []
    for path in sorted(ref.iterdir()):
        if path.suffix not in (".log", ".txt"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        first = text.splitlines()[0] if text else ""
        if "GB10" in first and "NOT a Spark" not in first and s._AVAILABLE_KV.search(text):
            if path.name not in fixtures:
                missing.append(path.name)
    print(
        f"\nGB10 logs with 'Available KV cache memory' in {ref}: "
        + (f"missing from tests/fixtures: {', '.join(missing)}" if missing else "all compared")
    )


def _median_ms(cmd: list[str], runs: int = 5) -> float:
    # As installed: with bytecode written (a first, unmeasured run writes it), which a
    # shell's PYTHONDONTWRITEBYTECODE would otherwise leave to compile on every run.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(cmd, capture_output=True, check=False, cwd=ROOT, env=env)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False, cwd=ROOT, env=env)
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

"""Compare two benchmark runs figure by figure, and say which deltas are beyond the noise.

The noise rule (per figure, per concurrency level), as a fraction of the baseline value:

    noise = max(FLOOR, sampling noise, spread of repeats)

- Sampling noise comes from the per-request values behind the figure, kept in each level
  (`per_request`: TTFTs, end-to-end latencies, decode speeds, per-request mean gaps and a
  sample of the inter-token gaps), combined over both runs as sqrt(a^2 + b^2):
  - a mean (ITL mean, tokens/s per request mean, and total tokens/s and requests/s, which
    move inversely with the requests' end-to-end times): 2 x the relative standard error of
    the mean (stdev / mean / sqrt(n)), about a 95 % interval;
  - a percentile q (p50, p95): half the width of its 95 % distribution-free confidence
    interval from order statistics (ranks n*q +- 2*sqrt(n*q*(1-q))), relative to the value.
    With few requests a p95 rests on the slowest two or three, and its noise is large.
- The spread of repeats is (max - min) / mean of the figure over the repeats of a level
  (`BenchConfig.repeats` > 1) and over earlier benchmark runs with the same recipe, cluster,
  settings and benchmark config (passed in as `repeat_runs`), whichever is larger.
- FLOOR (5 %) covers what within-run samples cannot see: client timer and scheduling
  jitter on a shared machine and relaunch-to-relaunch drift (measured on the simulator:
  unchanged settings moved TTFT by up to 3.4 % between launches). Repeats widen it.
- `errors` has no noise: any change is reported.
- Levels are matched by concurrency and context depth. Two runs compare only when they
  measured the same workload (`core.workload.workload_differences`: lengths, file content,
  shared prefix, depths, seed) and the same benchmark settings below; goodput is judged
  only when both runs had the same goodput targets.
A delta is "beyond noise" when |delta| / baseline > noise.

`compare_runs` is the one comparison every interface shows (`history compare`, the export's
report, the cockpit's history and tuning): the same repeats, so the same verdicts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from spark_tui.core.wording import change_text, depth_label
from spark_tui.core.workload import workload_differences
from spark_tui.ops.bench import FIGURES
from spark_tui.ops.history import History, Run, changed_settings

NOISE_FLOOR = 0.05
# Benchmark settings two runs must share for their figures to be compared.
BENCH_SETTINGS = (
    "requests_per_level",
    "temperature",
    "force_output_length",
)
# Figure -> (label, display unit); seconds are shown as milliseconds.
FIGURE_LABELS = {
    "ttft_p50_s": ("TTFT p50", "ms"),
    "ttft_p95_s": ("TTFT p95", "ms"),
    "itl_mean_s": ("ITL mean", "ms"),
    "itl_p50_s": ("ITL p50", "ms"),
    "itl_p95_s": ("ITL p95", "ms"),
    "tps_per_request_mean": ("tok/s per request", ""),
    "tps_per_request_p50": ("tok/s per request p50", ""),
    "total_output_tps": ("total tok/s", ""),
    "requests_per_s": ("requests/s", ""),
    "latency_p50_s": ("latency p50", "ms"),
    "goodput_rps": ("goodput req/s", ""),
    "errors": ("errors", ""),
}
# Figure -> (per-request values behind it, "mean" or the percentile it is).
_SOURCE: dict[str, tuple[str, str | float]] = {
    "ttft_p50_s": ("ttft_s", 0.50),
    "ttft_p95_s": ("ttft_s", 0.95),
    "itl_mean_s": ("itl_mean_s", "mean"),
    "itl_p50_s": ("itl_gaps_s", 0.50),
    "itl_p95_s": ("itl_gaps_s", 0.95),
    "tps_per_request_mean": ("tokens_per_s", "mean"),
    "tps_per_request_p50": ("tokens_per_s", 0.50),
    "total_output_tps": ("latency_s", "mean"),
    "requests_per_s": ("latency_s", "mean"),
    "latency_p50_s": ("latency_s", 0.50),
    "goodput_rps": ("latency_s", "mean"),
}
RULE = (
    "beyond noise when |delta| > max(5 %, 95 % sampling interval of the per-request values "
    "(standard error for means, order-statistic interval for percentiles), spread of "
    "repeated runs)"
)


@dataclass
class FigureDelta:
    """One figure at one concurrency level in both runs, its delta and the noise threshold."""

    concurrency: int
    figure: str
    baseline: float | None
    value: float | None
    delta: float | None
    delta_pct: float | None
    noise_pct: float | None
    beyond_noise: bool
    better: bool | None  # None when unchanged within noise or not comparable

    comparable: bool = True
    context_depth: int = 0

    @property
    def level_label(self) -> str:
        """`c8`, or `c8@4k` at a context depth."""
        depth = f"@{depth_label(self.context_depth)}" if self.context_depth else ""
        return f"c{self.concurrency}{depth}"

    @property
    def verdict(self) -> str:
        if not self.comparable:
            return "not comparable"
        if self.delta is None:
            return "n/a"
        if not self.beyond_noise:
            return "within noise"
        return "better" if self.better else "worse"


@dataclass
class Comparison:
    """Benchmark B against baseline A: the changed settings and every figure's delta."""

    baseline_id: str
    run_id: str
    changed: list[dict[str, Any]]
    figures: list[FigureDelta] = field(default_factory=list)
    rule: str = RULE
    notes: list[str] = field(default_factory=list)
    # False when the two benchmarks were measured with different settings: the figures
    # are shown side by side but not judged.
    comparable: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def get(self, concurrency: int, figure: str, context_depth: int = 0) -> FigureDelta | None:
        return next(
            (
                f
                for f in self.figures
                if f.concurrency == concurrency
                and f.figure == figure
                and f.context_depth == context_depth
            ),
            None,
        )

    def to_text(self) -> str:
        """A fixed-width table with the changed setting and the noise rule on top."""
        lines = [
            f"{self.run_id} against baseline {self.baseline_id}",
            f"changed: {self.changed_text()}",
            f"noise rule: {self.rule}",
        ]
        lines += [f"note: {n}" for n in self.notes]
        lines.append(
            f"{'conc':>7}  {'figure':<22} {'baseline':>11} {'run':>11} {'delta':>9} "
            f"{'noise':>7}  verdict"
        )
        for f in self.figures:
            noise = "-" if f.noise_pct is None else f"{f.noise_pct:.1f}%"
            pct = "-" if f.delta_pct is None else f"{f.delta_pct:+.1f}%"
            lines.append(
                f"{f.level_label.removeprefix('c'):>7}  {FIGURE_LABELS.get(f.figure, (f.figure, ''))[0]:<22} "
                f"{fmt_figure(f.figure, f.baseline):>11} {fmt_figure(f.figure, f.value):>11} "
                f"{pct:>9} {noise:>7}  {f.verdict}"
            )
        return "\n".join(lines)

    def changed_text(self) -> str:
        if not self.changed:
            return "no setting changed"
        return ", ".join(change_text(c["name"], c["before"], c["after"]) for c in self.changed)


# The figures of a benchmark's per-level table, in its column order (the CLI and the export).
TABLE_FIGURES = (
    "ttft_p50_s",
    "ttft_p95_s",
    "itl_mean_s",
    "itl_p95_s",
    "tps_per_request_mean",
    "total_output_tps",
    "requests_per_s",
)


def fmt_figure(figure: str, value: float | None) -> str:
    """A figure in its display unit (seconds as ms)."""
    if value is None:
        return "-"
    if FIGURE_LABELS.get(figure, ("", ""))[1] == "ms":
        return f"{value * 1000:.1f} ms"
    if figure == "errors":
        return f"{value:.0f}"
    return f"{value:.2f}"


def _rel_se(values: Sequence[float]) -> float | None:
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if len(xs) < 2:
        return None
    mean = statistics.fmean(xs)
    if mean == 0:
        return None
    return statistics.stdev(xs) / abs(mean) / math.sqrt(len(xs))


def _spread(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if len(xs) < 2:
        return None
    mean = statistics.fmean(xs)
    return (max(xs) - min(xs)) / abs(mean) if mean else None


def _quantile_halfwidth(values: Sequence[float], q: float) -> float | None:
    """Half the 95 % order-statistic confidence interval of the q-quantile, relative."""
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    n = len(xs)
    if n < 2:
        return None
    k = q * (n - 1)
    h = 2 * math.sqrt(n * q * (1 - q))
    lo, hi = xs[max(0, math.floor(k - h))], xs[min(n - 1, math.ceil(k + h))]
    pos = k - math.floor(k)
    value = xs[math.floor(k)] + (xs[min(n - 1, math.floor(k) + 1)] - xs[math.floor(k)]) * pos
    return (hi - lo) / 2 / abs(value) if value else None


def _levels(run: Run) -> dict[tuple[int, int], dict[str, Any]]:
    """A run's levels by (context depth, concurrency)."""
    bench = run.results.get("bench") or {}
    return {
        (int(lv.get("context_depth") or 0), int(lv["concurrency"])): lv
        for lv in bench.get("levels") or []
    }


def noise_for(
    figure: str,
    a: dict[str, Any],
    b: dict[str, Any],
    repeat_values: Sequence[float | None] = (),
) -> float:
    """The noise threshold (a fraction) for one figure of two levels; see the module doc."""
    terms = [NOISE_FLOOR]
    if figure in _SOURCE:
        source, kind = _SOURCE[figure]
        parts = []
        for lv in (a, b):
            values = (lv.get("per_request") or {}).get(source) or []
            if kind == "mean":
                se = _rel_se(values)
                parts.append(None if se is None else 2 * se)
            else:
                parts.append(_quantile_halfwidth(values, float(kind)))
        known = [p for p in parts if p is not None]
        if known:
            terms.append(math.sqrt(sum(p * p for p in known)))
    for lv in (a, b):
        spread = _spread([rep.get(figure) for rep in lv.get("repeats") or []])
        if spread is not None:
            terms.append(spread)
    spread = _spread(list(repeat_values))
    if spread is not None:
        terms.append(spread)
    return max(terms)


def compare_bench(baseline: Run, run: Run, repeat_runs: Sequence[Run] = ()) -> Comparison:
    """Each figure of `run` against `baseline`, level by level, with noise and direction."""
    cmp = Comparison(baseline.id, run.id, changed_settings(run, baseline))
    la, lb = _levels(baseline), _levels(run)
    cfg_a = (baseline.results.get("bench") or {}).get("config") or {}
    cfg_b = (run.results.get("bench") or {}).get("config") or {}
    differ = [
        f"{key} ({cfg_a.get(key)} vs {cfg_b.get(key)})"
        for key in BENCH_SETTINGS
        if cfg_a.get(key) != cfg_b.get(key)
    ] + [f"workload {d}" for d in workload_differences(cfg_a, cfg_b)]
    for what in differ:
        cmp.comparable = False
        cmp.notes.append(
            f"the benchmarks differ in {what}: not like for like, so no figure is judged; "
            "benchmark both with the same settings (or pick a baseline measured like this run)"
        )
    goodput_a = ((cfg_a.get("workload") or {}).get("goodput")) or []
    goodput_b = ((cfg_b.get("workload") or {}).get("goodput")) or []
    same_goodput = goodput_a == goodput_b
    if not same_goodput:
        cmp.notes.append(
            f"goodput targets differ ({' '.join(goodput_a) or 'none'} vs "
            f"{' '.join(goodput_b) or 'none'}): goodput is not judged"
        )
    missing = sorted(set(la) ^ set(lb))
    if missing:
        names = [f"c{c}" + (f"@{depth_label(d)}" if d else "") for d, c in missing]
        cmp.notes.append(f"levels measured in only one run: {', '.join(names)}")
    repeat_levels = [_levels(r) for r in repeat_runs]
    for key in sorted(set(la) & set(lb)):
        depth, conc = key
        a, b = la[key], lb[key]
        fa, fb = a.get("figures") or {}, b.get("figures") or {}
        for figure, higher_is_better in FIGURES.items():
            va, vb = fa.get(figure), fb.get(figure)
            if va is None and vb is None and figure == "goodput_rps":
                continue  # no targets in either run: no such figure
            if va is None or vb is None:
                cmp.figures.append(
                    FigureDelta(conc, figure, va, vb, None, None, None, False, None, True, depth)
                )
                continue
            if not cmp.comparable or (figure == "goodput_rps" and not same_goodput):
                delta = vb - va
                pct = delta / abs(va) * 100 if va else None
                cmp.figures.append(
                    FigureDelta(conc, figure, va, vb, delta, pct, None, False, None, False, depth)
                )
                continue
            delta = vb - va
            pct = delta / abs(va) if va else (0.0 if delta == 0 else math.inf)
            if figure == "errors":
                noise = 0.0
                beyond = delta != 0
            else:
                reps = [(rl.get(key) or {}).get("figures", {}).get(figure) for rl in repeat_levels]
                noise = noise_for(figure, a, b, reps)
                beyond = abs(pct) > noise
            better = (delta > 0) == higher_is_better if beyond and delta != 0 else None
            cmp.figures.append(
                FigureDelta(
                    conc, figure, va, vb, delta, pct * 100, noise * 100, beyond, better, True, depth
                )
            )
    return cmp


def compare_runs(history: History, baseline: Run, run: Run) -> Comparison:
    """`run` against `baseline` with the spread of the baseline's earlier repeats (the
    benchmarks with its recipe, cluster, settings and benchmark config) widening the noise."""
    repeats = [r for r in history.repeats_of(baseline) if r.id not in (baseline.id, run.id)]
    return compare_bench(baseline, run, repeats)

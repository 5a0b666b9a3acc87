"""Prometheus text parsing for vLLM's `/metrics`, tolerant of the names used across versions.

vLLM renamed its gauges over time (`gpu_cache_usage_perc` became `kv_cache_usage_perc` in V1),
adds an `engine` label per engine core, and real pastes are often cut mid-line: unparsable
lines are skipped, never fatal.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_LINE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"(?:\{(?P<labels>.*)\})?"
    r"\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+))?\s*$"
)
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')

# Our figure -> metric names, newest first. The V0 `cpu_cache_usage_perc` is the CPU swap
# space, not the KV cache on the GPU, so it is deliberately not an alias.
ALIASES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage_perc": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "num_requests_running": ("vllm:num_requests_running",),
    "num_requests_waiting": ("vllm:num_requests_waiting",),
}
# Per-engine values are summed for request counts and the fullest engine is taken for the cache.
_SUMMED = ("num_requests_running", "num_requests_waiting")
_GAUGE_NAMES = tuple(name for names in ALIASES.values() for name in names)


@dataclass(frozen=True)
class Sample:
    """One sample line: metric name, its labels and value."""

    name: str
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    value: float = 0.0


def _unescape(v: str) -> str:
    return v.replace("\\\\", "\x00").replace('\\"', '"').replace("\\n", "\n").replace("\x00", "\\")


def _parse_labels(text: str) -> dict[str, str] | None:
    labels: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if not m:
            return None
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
    return labels


def _parse_value(text: str) -> float | None:
    low = text.lower()
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    if low == "nan":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def parse_prometheus(text: str) -> list[Sample]:
    """Every well-formed sample line of a Prometheus text exposition; the rest is skipped."""
    out: list[Sample] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        labels = _parse_labels(m.group("labels")) if m.group("labels") is not None else {}
        value = _parse_value(m.group("value"))
        if labels is None or value is None:
            continue
        out.append(Sample(m.group("name"), labels, value))
    return out


def vllm_gauges(text: str) -> dict[str, float]:
    """kv_cache_usage_perc (0..1), num_requests_running and _waiting from a /metrics body.

    A figure is absent from the result when the server does not export it.
    """
    # Only the gauges' own lines are parsed: the rest of real vLLM's page is ~60 kB of
    # histograms, whose full parse (2 ms) would hold up the event loop that timestamps a
    # benchmark's streamed replies.
    lines = (line for line in text.splitlines() if line.startswith(_GAUGE_NAMES))
    samples = parse_prometheus("\n".join(lines))
    by_name: dict[str, list[float]] = {}
    for s in samples:
        if not math.isnan(s.value):
            by_name.setdefault(s.name, []).append(s.value)
    found: dict[str, float] = {}
    for figure, names in ALIASES.items():
        for name in names:
            if name in by_name:
                values = by_name[name]
                found[figure] = float(sum(values) if figure in _SUMMED else max(values))
                break
    return found

"""Prometheus text exposition (format 0.0.4) as prometheus_client writes it in multiprocess
mode, which is how vLLM serves `/metrics`: labels sorted by name, Go-style floats, and a
`_created` gauge family after every counter and histogram. Standard library only."""

from __future__ import annotations

import math
from collections.abc import Sequence

Labels = Sequence[tuple[str, str]]


def go_float(value: float) -> str:
    """prometheus_client's float formatting (Go style: exponent for large values)."""
    value = float(value)
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6 and "e" not in text:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


class Histogram:
    """A cumulative histogram with fixed upper bounds (the +Inf bucket is `total`)."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = [float(b) for b in buckets]
        self.counts = [0] * len(self.buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Record one observation."""
        self.total += 1
        self.sum += value
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1


def label_text(pairs: Labels) -> str:
    """`{a="1",b="2"}` with the names sorted, as the multiprocess collector writes them."""
    ordered = sorted(pairs, key=lambda kv: kv[0])
    return "{" + ",".join(f'{k}="{v}"' for k, v in ordered) + "}"


class Writer:
    """Collects families into one exposition text."""

    def __init__(self, created: float) -> None:
        self.lines: list[str] = []
        self.created = go_float(created)

    def _head(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def _created(self, base: str, help_text: str, label_sets: list[Labels]) -> None:
        self._head(f"{base}_created", "gauge", help_text)
        for labels in label_sets:
            self.lines.append(f"{base}_created{label_text(labels)} {self.created}")

    def gauge(self, name: str, help_text: str, samples: list[tuple[Labels, float]]) -> None:
        """A gauge family: one sample per label set."""
        self._head(name, "gauge", help_text)
        for labels, value in samples:
            self.lines.append(f"{name}{label_text(labels)} {go_float(value)}")

    def counter(self, name: str, help_text: str, samples: list[tuple[Labels, float]]) -> None:
        """A counter family (`name` without `_total`; the multiprocess collector declares it
        with `_total`), its samples and its `_created` gauges."""
        self._head(f"{name}_total", "counter", help_text)
        for labels, value in samples:
            self.lines.append(f"{name}_total{label_text(labels)} {go_float(value)}")
        self._created(name, help_text, [labels for labels, _v in samples])

    def histogram(self, name: str, help_text: str, labels: Labels, hist: Histogram | None) -> None:
        """A histogram family of one label set, its buckets, count and sum, and `_created`."""
        self._head(name, "histogram", help_text)
        h = hist if hist is not None else Histogram([])
        for bound, count in zip(h.buckets, h.counts):
            le = list(labels) + [("le", go_float(bound))]
            self.lines.append(f"{name}_bucket{label_text(le)} {go_float(count)}")
        inf = list(labels) + [("le", "+Inf")]
        self.lines.append(f"{name}_bucket{label_text(inf)} {go_float(h.total)}")
        self.lines.append(f"{name}_count{label_text(labels)} {go_float(h.total)}")
        self.lines.append(f"{name}_sum{label_text(labels)} {go_float(h.sum)}")
        self._created(name, help_text, [labels])

    def text(self) -> str:
        """The whole page."""
        return "\n".join(self.lines) + "\n"

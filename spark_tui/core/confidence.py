"""Confidence intervals of a figure measured several times (the repeats of a benchmark)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Two-sided 95 % Student t quantiles by degrees of freedom (1..30); beyond, the normal's.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(dof: int) -> float:
    """The two-sided 95 % quantile of Student's t with `dof` degrees of freedom."""
    if dof < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    return _T95[dof - 1] if dof <= len(_T95) else 1.960


def mean_ci95(values: Sequence[float | None]) -> tuple[float, float] | None:
    """(mean, half-width) of the 95 % confidence interval of the mean of the finite values;
    None with fewer than two (one measurement says nothing of its spread)."""
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if len(xs) < 2:
        return None
    return statistics.fmean(xs), t95(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))

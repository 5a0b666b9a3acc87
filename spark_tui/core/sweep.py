"""A sweep of one setting: the values to try, the targets a value must meet, the objective
that names the best one, and each value's verdict. Pure rules over a benchmark's figures
(per concurrency level, as the history keeps them); the service runs the sweep.

Targets read `FIGURE OP LIMIT[@cN]`, e.g. `ttft_p95<=2s@c8`, `itl_p95<80ms@c8`,
`tok_s>=30@c8`; without `@cN` every measured level must meet it. The objective reads
`FIGURE[@cN]`; without `@cN` it is read at the highest level measured.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spark_tui.core.errors import InputError

# What a user types -> the benchmark's figure (its own name is accepted too).
FIGURE_NAMES: dict[str, str] = {
    "ttft_p50": "ttft_p50_s",
    "ttft_p95": "ttft_p95_s",
    "itl_mean": "itl_mean_s",
    "itl_p50": "itl_p50_s",
    "itl_p95": "itl_p95_s",
    "latency_p50": "latency_p50_s",
    "tok_s": "total_output_tps",
    "tok_s_per_request": "tps_per_request_mean",
    "req_s": "requests_per_s",
    "errors": "errors",
}
# The figures where more is better (the objective's default direction, the chart's).
HIGHER_IS_BETTER = frozenset({"total_output_tps", "tps_per_request_mean", "requests_per_s"})
# Seconds in the records; a limit on them needs its unit (2s, 80ms).
_SECONDS = frozenset(f for f in FIGURE_NAMES.values() if f.endswith("_s"))
_UNITS = {"s": 1.0, "ms": 1e-3}
_TARGET = re.compile(
    r"^\s*(?P<name>[a-z][a-z0-9_]*)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<num>[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(?P<unit>ms|s)?\s*"
    r"(?:@\s*c(?P<conc>[0-9]+))?\s*$",
    re.IGNORECASE,
)
_OBJECTIVE = re.compile(r"^\s*(?P<name>[a-z][a-z0-9_]*)\s*(?:@\s*c(?P<conc>[0-9]+))?\s*$", re.I)
FIGURES_HELP = ", ".join(FIGURE_NAMES)
Levels = Mapping[int, Mapping[str, float | None]]


def figure_of(name: str) -> str:
    """The benchmark figure a user's word names (InputError when none)."""
    key = name.strip().lower()
    if key in FIGURE_NAMES:
        return FIGURE_NAMES[key]
    if key in FIGURE_NAMES.values():
        return key
    raise InputError(f"no benchmark figure is called {name!r}", f"use one of: {FIGURES_HELP}")


def show_figure(figure: str, value: float | None) -> str:
    """A figure with its unit, as targets are written (seconds as ms below 10 s)."""
    if value is None or not math.isfinite(value):
        return "-"
    if figure in _SECONDS:
        return f"{value * 1000:.0f} ms" if value < 10 else f"{value:.1f} s"
    if figure == "errors":
        return f"{value:.0f}"
    return f"{value:.1f}"


def _user_name(figure: str) -> str:
    return next((k for k, v in FIGURE_NAMES.items() if v == figure), figure)


class Target(BaseModel):
    """A limit one figure must keep at one concurrency level (None: at every level)."""

    model_config = ConfigDict(frozen=True)

    figure: str
    op: Literal["<=", ">=", "<", ">"]
    limit: float = Field(allow_inf_nan=False, ge=0)
    concurrency: int | None = Field(default=None, ge=1, le=100_000)

    @field_validator("figure")
    @classmethod
    def _known(cls, value: str) -> str:
        return figure_of(value)

    @classmethod
    def parse(cls, text: str) -> Target:
        """`ttft_p95<=2s@c8` -> Target; InputError (with the form to use) when it is not."""
        m = _TARGET.match(text)
        if m is None:
            raise InputError(
                f"cannot read the target {text!r}",
                "write FIGURE<=LIMIT@cN, e.g. --target ttft_p95<=2s@c8 or --target "
                f"tok_s>=30@c8 (figures: {FIGURES_HELP})",
            )
        figure = figure_of(m["name"])
        unit = (m["unit"] or "").lower()
        if figure in _SECONDS and not unit:
            raise InputError(
                f"the target {text!r} gives a time without its unit",
                f"write it in s or ms, e.g. {m['name']}{m['op']}{m['num']}ms",
            )
        if figure not in _SECONDS and unit:
            raise InputError(
                f"{m['name']} is not a time: {text!r} cannot carry {unit!r}",
                f"write the number alone, e.g. {m['name']}{m['op']}{m['num']}",
            )
        limit = float(m["num"]) * _UNITS.get(unit, 1.0)
        try:
            return cls(
                figure=figure,
                op=m["op"],  # type: ignore[arg-type]  # the pattern allows only the four
                limit=limit,
                concurrency=int(m["conc"]) if m["conc"] else None,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "value"
            raise InputError(
                f"the target {text!r}: its {field}: {first['msg'].lower()}",
                "give a finite limit and a concurrency of at least 1, e.g. ttft_p95<=2s@c8",
            ) from None

    def text(self) -> str:
        """As a user writes it: `ttft_p95<=2000 ms@c8`."""
        where = f"@c{self.concurrency}" if self.concurrency else ""
        return f"{_user_name(self.figure)}{self.op}{show_figure(self.figure, self.limit)}{where}"

    def met_by(self, value: float) -> bool:
        return {
            "<=": value <= self.limit,
            "<": value < self.limit,
            ">=": value >= self.limit,
            ">": value > self.limit,
        }[self.op]

    def check(self, levels: Levels) -> list[Missed]:
        """The levels where the figure misses the limit (or was not measured): empty when
        the target is met."""
        wanted = [self.concurrency] if self.concurrency else sorted(levels)
        missed = []
        for conc in wanted:
            value = (levels.get(conc) or {}).get(self.figure)
            if value is None or not math.isfinite(value):
                missed.append(Missed(self, conc, None))
            elif not self.met_by(value):
                missed.append(Missed(self, conc, value))
        return missed


@dataclass(frozen=True)
class Missed:
    """A target a value did not meet: the figure that failed it (None: not measured)."""

    target: Target
    concurrency: int
    value: float | None

    def text(self) -> str:
        name = _user_name(self.target.figure)
        if self.value is None:
            return f"{name} not measured at c{self.concurrency}"
        limit = show_figure(self.target.figure, self.target.limit)
        return (
            f"{name} {show_figure(self.target.figure, self.value)} at c{self.concurrency}"
            f" (target {self.target.op} {limit})"
        )


class Objective(BaseModel):
    """The figure the best value has the most (or least) of, at one concurrency level
    (None: the highest level measured)."""

    model_config = ConfigDict(frozen=True)

    figure: str = "total_output_tps"
    maximize: bool = True
    concurrency: int | None = Field(default=None, ge=1, le=100_000)

    @field_validator("figure")
    @classmethod
    def _known(cls, value: str) -> str:
        return figure_of(value)

    @classmethod
    def parse(cls, text: str, *, maximize: bool = True) -> Objective:
        """`tok_s@c8` -> Objective; InputError when it is not one."""
        m = _OBJECTIVE.match(text)
        if m is None:
            flag = "--maximize" if maximize else "--minimize"
            raise InputError(
                f"cannot read the objective {text!r}",
                f"write FIGURE@cN, e.g. {flag} tok_s@c8 (figures: {FIGURES_HELP})",
            )
        try:
            return cls(
                figure=figure_of(m["name"]),
                maximize=maximize,
                concurrency=int(m["conc"]) if m["conc"] else None,
            )
        except ValidationError:
            raise InputError(
                f"the objective {text!r}: its concurrency must be at least 1",
                "write FIGURE@cN with N >= 1, e.g. tok_s@c8",
            ) from None

    def text(self) -> str:
        where = f"@c{self.concurrency}" if self.concurrency else ""
        return f"{'maximize' if self.maximize else 'minimize'} {_user_name(self.figure)}{where}"

    def level(self, levels: Levels) -> int | None:
        if self.concurrency is not None:
            return self.concurrency
        return max(levels) if levels else None

    def value(self, levels: Levels) -> float | None:
        conc = self.level(levels)
        value = (levels.get(conc) or {}).get(self.figure) if conc is not None else None
        return value if value is not None and math.isfinite(value) else None


def default_objective(targets: Sequence[Target]) -> Objective:
    """Without --maximize: total tokens/s, at the level the first target names."""
    conc = next((t.concurrency for t in targets if t.concurrency), None)
    return Objective(figure="total_output_tps", maximize=True, concurrency=conc)


def parse_sweep(text: str) -> tuple[str, tuple[str, ...]]:
    """`max_num_seqs=4,8,16` -> ("max_num_seqs", ("4", "8", "16")); the values are typed
    against the recipe where the sweep starts."""
    from spark_tui.core.overrides import parse_set

    key, raw = parse_set(text)
    values = tuple(v.strip() for v in raw.split(","))
    if any(not v for v in values):
        raise InputError(
            f"an empty value in --sweep {text!r}",
            "list the values with commas and nothing between two commas, e.g. "
            "--sweep max_num_seqs=4,8,16",
        )
    if len(values) < 2:
        raise InputError(
            f"--sweep {text!r} names one value",
            "give two or more values (one change alone: --set KEY=VALUE)",
        )
    return key, values


@dataclass(frozen=True)
class Verdict:
    """One value's outcome: measured or not, the targets it missed, its objective figure."""

    measured: bool
    missed: tuple[Missed, ...] = ()
    objective: float | None = None

    @property
    def meets(self) -> bool:
        return self.measured and not self.missed

    def text(self) -> str:
        if not self.measured:
            return "did not start"
        if not self.missed:
            return "meets"
        return "fails: " + "; ".join(m.text() for m in self.missed)


def verdict(levels: Levels | None, targets: Sequence[Target], objective: Objective) -> Verdict:
    """A value's verdict from its benchmark's levels (None: it was not measured)."""
    if levels is None:
        return Verdict(False)
    missed = tuple(m for t in targets for m in t.check(levels))
    return Verdict(True, missed, objective.value(levels))


def best_of(verdicts: Sequence[Verdict], objective: Objective) -> int | None:
    """The index of the best value that meets every target (ties: the first); None when
    no value does."""
    best: int | None = None
    for i, v in enumerate(verdicts):
        if not v.meets or v.objective is None:
            continue
        if best is None:
            best = i
            continue
        current = verdicts[best].objective
        assert current is not None
        if (v.objective > current) if objective.maximize else (v.objective < current):
            best = i
    return best


def levels_of(bench: Mapping[str, Any] | None) -> dict[int, dict[str, float | None]] | None:
    """A recorded benchmark's (`results["bench"]`) figures per concurrency level."""
    if not bench:
        return None
    out: dict[int, dict[str, float | None]] = {}
    for lv in bench.get("levels") or []:
        out[int(lv["concurrency"])] = dict(lv.get("figures") or {})
    return out


@dataclass
class Eta:
    """The time a sweep has left: the mean of the values measured so far, times the
    values left, less what the current one has run."""

    durations: list[float] = field(default_factory=list)

    def left(self, values_left: int, current_elapsed: float = 0.0) -> float | None:
        if not self.durations or values_left <= 0:
            return None
        mean = sum(self.durations) / len(self.durations)
        return max(0.0, mean * values_left - current_elapsed)

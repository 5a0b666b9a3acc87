"""What a benchmark sends: prompt and output lengths (a fixed count, a uniform range, a bounded
normal, or the lines of a workload file), a share of every prompt that all requests have in
common (so prefix caching can show), the context depths to measure at, the goodput targets,
and the seed that makes the lengths and words the same from run to run.

Settings are written as the user types them: lengths `256`, `128-512`, `normal:256,64` or
`normal:256,64,32-1024` (mean, standard deviation, bounds); goodput targets `ttft<=2s`,
`itl<=80ms`, `latency<=30s` (per request: time to first token, mean gap between tokens,
end to end), written as a sweep's targets (`core.sweep`) but of one request's figures, so
without a concurrency. A workload file is JSON lines, each `{"prompt_tokens": N, "output_tokens": M}`
or `{"prompt": "real text", "output_tokens": M}` (`output_tokens` optional: the output
lengths setting then decides)."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from spark_tui.core.errors import InputError

LENGTHS_HELP = "write a length as 256, a range as 128-512, or normal:MEAN,SD[,LOW-HIGH]"
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


class Lengths(BaseModel):
    """A token-count distribution: fixed, uniform over [low, high], or normal (mean, stdev)
    rounded and kept within [low, high]. Written and stored as its spec (`256`, `128-512`,
    `normal:256,64,32-1024`)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["fixed", "uniform", "normal"] = "fixed"
    low: int = 1
    high: int = 1
    mean: float = 0.0
    stdev: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _from_spec(cls, data: Any) -> Any:
        if isinstance(data, (int, str)) and not isinstance(data, bool):
            parsed = parse_lengths(data, "length")
            return {k: getattr(parsed, k) for k in ("kind", "low", "high", "mean", "stdev")}
        return data

    @model_validator(mode="after")
    def _check(self) -> Lengths:
        if self.low < 1 or self.high < self.low:
            raise ValueError(f"lengths must be at least 1 and low <= high ({LENGTHS_HELP})")
        if self.kind == "normal" and self.stdev < 0:
            raise ValueError("a normal's standard deviation cannot be negative")
        return self

    @model_serializer(mode="plain")
    def _to_spec(self) -> int | str:
        return self.spec()

    @classmethod
    def fixed(cls, tokens: int) -> Lengths:
        return cls(kind="fixed", low=tokens, high=tokens, mean=tokens)

    def spec(self) -> int | str:
        """The stored and typed form: an int when fixed, else the spec string."""
        if self.kind == "fixed":
            return self.low
        if self.kind == "uniform":
            return f"{self.low}-{self.high}"
        return f"normal:{_num(self.mean)},{_num(self.stdev)},{self.low}-{self.high}"

    def __str__(self) -> str:
        return str(self.spec())

    @property
    def typical(self) -> int:
        """The centre of the distribution (what a summary line shows)."""
        if self.kind == "fixed":
            return self.low
        if self.kind == "uniform":
            return (self.low + self.high) // 2
        return round(self.mean)

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return self.low
        if self.kind == "uniform":
            return rng.randint(self.low, self.high)
        return min(self.high, max(self.low, round(rng.gauss(self.mean, self.stdev))))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def parse_lengths(text: int | str, what: str) -> Lengths:
    """`256`, `128-512`, `normal:256,64` or `normal:256,64,32-1024` as Lengths; `what` names
    the setting in the error."""
    spec = str(text).strip()

    def bad(why: str) -> InputError:
        return InputError(f"{what} {spec!r}: {why}", LENGTHS_HELP)

    if spec.isdigit():
        n = int(spec)
        if n < 1:
            raise bad("a length must be at least 1 token")
        return Lengths.fixed(n)
    if m := _RANGE.match(spec.removeprefix("uniform:")):
        low, high = int(m.group(1)), int(m.group(2))
        if low < 1 or high < low:
            raise bad("a range is LOW-HIGH with 1 <= LOW <= HIGH")
        return Lengths(kind="uniform", low=low, high=high, mean=(low + high) / 2)
    if spec.startswith("normal:"):
        parts = [p.strip() for p in spec.removeprefix("normal:").split(",")]
        if len(parts) not in (2, 3):
            raise bad("a normal is normal:MEAN,SD or normal:MEAN,SD,LOW-HIGH")
        try:
            mean, sd = float(parts[0]), float(parts[1])
        except ValueError:
            raise bad("MEAN and SD must be numbers") from None
        if mean < 1 or sd < 0 or not (math.isfinite(mean) and math.isfinite(sd)):
            raise bad("MEAN must be at least 1 and SD at least 0")
        if len(parts) == 3:
            bounds = _RANGE.match(parts[2])
            if not bounds:
                raise bad("the bounds are LOW-HIGH")
            low, high = int(bounds.group(1)), int(bounds.group(2))
        else:
            # Three standard deviations either side: the tails a bench should not be made of.
            low, high = max(1, math.floor(mean - 3 * sd)), math.ceil(mean + 3 * sd)
        if low < 1 or high < low or not low <= mean <= high:
            raise bad("the bounds must hold the mean, with 1 <= LOW <= HIGH")
        return Lengths(kind="normal", low=low, high=high, mean=mean, stdev=sd)
    raise bad("not a length")


# -- goodput targets -------------------------------------------------------------------------

GOODPUT_FIGURES = {
    "ttft": "time to first token",
    "itl": "mean gap between tokens",
    "latency": "end-to-end latency",
}
GOODPUT_HELP = "write a goodput target like ttft<=2s, itl<=80ms or latency<=30s"
_TARGET = re.compile(r"^\s*([a-z_]+)\s*<=\s*([0-9.]+)\s*(ms|s)?\s*$")


def parse_duration(text: str) -> float:
    """`2s`, `80ms` or `1.5` (seconds) in seconds; ValueError when it is none of those."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*", text)
    if not m:
        raise ValueError(text)
    value = float(m.group(1))
    return value / 1000 if m.group(2) == "ms" else value


class GoodputTarget(BaseModel):
    """One per-request limit a request must meet to count toward goodput (`itl<=80ms`)."""

    model_config = ConfigDict(frozen=True)

    figure: Literal["ttft", "itl", "latency"]
    limit_s: float = Field(gt=0)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):
            target = parse_goodput_target(data)
            return {"figure": target.figure, "limit_s": target.limit_s}
        return data

    @model_serializer(mode="plain")
    def _to_text(self) -> str:
        return str(self)

    def __str__(self) -> str:
        limit = f"{self.limit_s * 1000:g}ms" if self.limit_s < 1 else f"{self.limit_s:g}s"
        return f"{self.figure}<={limit}"

    def met(self, ttft_s: float | None, itl_s: float | None, latency_s: float | None) -> bool:
        """Whether one request's figure is within the limit (a request with no gaps, one
        token long, meets any ITL target)."""
        value = {"ttft": ttft_s, "itl": itl_s, "latency": latency_s}[self.figure]
        if value is None:
            return self.figure == "itl"
        return value <= self.limit_s


def parse_goodput_target(text: str) -> GoodputTarget:
    """`ttft<=2s` as a GoodputTarget; InputError (with the syntax) otherwise."""
    m = _TARGET.match(text)
    if not m or m.group(1) not in GOODPUT_FIGURES:
        names = ", ".join(GOODPUT_FIGURES)
        raise InputError(f"goodput target {text!r} is not FIGURE<=LIMIT ({names})", GOODPUT_HELP)
    if not m.group(3):
        # As a sweep's targets: a time always carries its unit.
        raise InputError(
            f"goodput target {text!r} gives a time without its unit",
            f"write it in s or ms, e.g. {m.group(1)}<={m.group(2)}s ({GOODPUT_HELP})",
        )
    try:
        limit = parse_duration(m.group(2) + m.group(3))
    except ValueError:
        raise InputError(
            f"goodput target {text!r}: the limit is not a number", GOODPUT_HELP
        ) from None
    if limit <= 0:
        raise InputError(f"goodput target {text!r}: the limit must be above 0", GOODPUT_HELP)
    return GoodputTarget.model_construct(figure=m.group(1), limit_s=limit)


# -- workload files --------------------------------------------------------------------------

FILE_HELP = (
    'a workload file is JSON lines, each {"prompt_tokens": N, "output_tokens": M} or '
    '{"prompt": "text", "output_tokens": M}'
)


class WorkloadEntry(BaseModel):
    """One line of a workload file: a prompt length or a real prompt, and maybe an output
    length."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int | None = Field(default=None, ge=1)
    prompt: str | None = None
    output_tokens: int | None = Field(default=None, ge=1)


def parse_workload_lines(text: str, source: str = "workload file") -> list[WorkloadEntry]:
    """The entries of a JSON-lines workload (blank lines skipped); InputError naming the line."""
    entries: list[WorkloadEntry] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where} is not JSON ({exc.msg})", FILE_HELP) from None
        if not isinstance(data, dict):
            raise InputError(f"{where} is not a JSON object", FILE_HELP)
        has_count, has_text = "prompt_tokens" in data, "prompt" in data
        if has_count == has_text:
            raise InputError(f"{where} needs exactly one of prompt_tokens and prompt", FILE_HELP)
        for key in ("prompt_tokens", "output_tokens"):
            value = data.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InputError(f"{where}: {key} must be a whole number of at least 1", FILE_HELP)
        if has_text and (not isinstance(data["prompt"], str) or not data["prompt"].strip()):
            raise InputError(f"{where}: prompt must be non-empty text", FILE_HELP)
        entries.append(
            WorkloadEntry(
                prompt_tokens=data.get("prompt_tokens"),
                prompt=data.get("prompt"),
                output_tokens=data.get("output_tokens"),
            )
        )
    if not entries:
        raise InputError(f"{source} has no entries", FILE_HELP)
    return entries


# -- the workload ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestShape:
    """What one request of a benchmark is: its prompt (a token count, or a real text whose
    count the server's tokenizer decides) and its output length."""

    index: int
    output_tokens: int
    prompt_tokens: int | None = None
    text: str | None = None


class Workload(BaseModel):
    """The requests a benchmark sends (see the module doc). `entries` (a workload file's
    lines) are not stored with a run: the file's name, digest and line count stand for them,
    so two runs with the same file (by content) compare, and a changed file does not."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    prompt_tokens: Lengths = Lengths.fixed(256)
    output_tokens: Lengths = Lengths.fixed(128)
    file: str | None = None
    file_digest: str | None = None
    file_entries: int = 0
    # How many of the file's lines give their own output length (the rest take
    # `output_tokens`): what the summary says of the output; the digest decides likeness.
    file_outputs: int = 0
    entries: tuple[WorkloadEntry, ...] = Field(default=(), exclude=True)
    shared_prefix: float = Field(default=0.0, ge=0.0, lt=1.0)
    context_depths: tuple[int, ...] = (0,)
    goodput: tuple[GoodputTarget, ...] = ()
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> Workload:
        if not self.context_depths or any(d < 0 for d in self.context_depths):
            raise ValueError("context depths are token counts of 0 or more")
        if len(set(self.context_depths)) != len(self.context_depths):
            raise ValueError("each context depth once")
        return self

    def with_file(self, path: str | Path) -> Workload:
        """This workload with the prompts (and output lengths) of a workload file."""
        p = Path(path).expanduser()
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise InputError(
                f"cannot read the workload file {p}: {exc.strerror or exc}",
                "pass the path of a JSON-lines file (" + FILE_HELP + ")",
            ) from None
        entries = parse_workload_lines(raw.decode("utf-8", "replace"), p.name)
        return self.model_copy(
            update={
                "file": str(path),
                "file_digest": hashlib.sha256(raw).hexdigest()[:16],
                "file_entries": len(entries),
                "file_outputs": sum(1 for e in entries if e.output_tokens is not None),
                "entries": tuple(entries),
            }
        )

    def reloaded(self) -> Workload:
        """This workload with its file's lines read again when it names a file but holds
        none (as a stored config does): refused when the file changed since (another file
        is another workload)."""
        if not self.file or self.entries:
            return self
        again = self.with_file(self.file)
        if self.file_digest and again.file_digest != self.file_digest:
            raise InputError(
                f"the workload file {self.file} changed since the benchmark it repeats",
                "benchmark with the file as it was, or measure a new baseline with it",
            )
        return again

    def shapes(self, start: int, count: int) -> list[RequestShape]:
        """Requests start..start+count-1: the same seed gives the same lengths (and, for a
        file, its lines in order, from the top again when they run out)."""
        out = []
        for i in range(start, start + count):
            rng = random.Random(f"{self.seed}:{i}")
            output = self.output_tokens.sample(rng)
            if self.entries:
                entry = self.entries[i % len(self.entries)]
                out.append(
                    RequestShape(
                        i,
                        entry.output_tokens or output,
                        entry.prompt_tokens,
                        entry.prompt,
                    )
                )
            else:
                out.append(RequestShape(i, output, self.prompt_tokens.sample(rng)))
        return out

    def summary(self) -> str:
        """One line: `prompt 128-512 tokens, output 128 tokens, shared prefix 50 %, depths 0,
        4096`."""
        if self.file:
            parts = [f"workload file {Path(self.file).name} ({self.file_entries} lines)"]
        else:
            parts = [f"prompt {self.prompt_tokens} tokens"]
        if self.file and self.file_outputs >= self.file_entries > 0:
            parts.append("output as each line gives")
        elif self.file and self.file_outputs:
            parts.append(f"output {self.output_tokens} tokens where a line gives none")
        else:
            parts.append(f"output {self.output_tokens} tokens")
        if self.shared_prefix:
            parts.append(f"shared prefix {self.shared_prefix * 100:.0f} %")
        if self.context_depths != (0,):
            parts.append("context " + ", ".join(map(str, self.context_depths)))
        if self.goodput:
            parts.append("goodput " + " ".join(map(str, self.goodput)))
        if self.seed:
            parts.append(f"seed {self.seed}")
        return ", ".join(parts)

    def measured_like(self) -> dict[str, Any]:
        """The settings that decide what is measured (goodput targets only judge it)."""
        data = self.model_dump(mode="json")
        data.pop("goodput", None)
        data.pop("file", None)  # the digest says whether it is the same workload
        data.pop("file_outputs", None)  # read from the file: the digest covers it
        return data


def workload_of(config: Mapping[str, Any]) -> Workload:
    """The workload of a stored benchmark config; one recorded before workloads existed had
    fixed `prompt_tokens` and `output_tokens` at its top level."""
    data = config.get("workload")
    if isinstance(data, Mapping):
        return Workload.model_validate(data)
    legacy = {k: config[k] for k in ("prompt_tokens", "output_tokens") if k in config}
    return Workload.model_validate(legacy)


def workload_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Which workload settings two stored benchmark configs differ in, each as
    `name (A vs B)`; empty when they measured the same workload."""
    wa, wb = workload_of(a).measured_like(), workload_of(b).measured_like()
    return [f"{k} ({wa.get(k)} vs {wb.get(k)})" for k in wa if wa.get(k) != wb.get(k)]


def parse_depths(text: str) -> tuple[int, ...]:
    """`0,4k,16k` -> (0, 4096, 16384): context depths in tokens (k is 1024)."""
    out = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        scale = 1024 if part.endswith("k") else 1
        try:
            value = int(float(part.removesuffix("k")) * scale)
        except ValueError:
            value = -1
        if value < 0:
            raise InputError(
                f"context depth {part!r} is not a token count",
                "write depths like --context-depth 0,4k,16k",
            )
        out.append(value)
    if not out or len(set(out)) != len(out):
        raise InputError(
            f"context depths {text!r}: give each depth once", "write them like 0,4k,16k"
        )
    return tuple(out)


def goodput_of(
    targets: Sequence[GoodputTarget],
    requests: Sequence[tuple[float | None, float | None, float | None]],
    duration_s: float,
) -> float | None:
    """Requests per second that met every target, from (ttft, mean itl, latency) of each
    successful request; None without targets or time."""
    if not targets or duration_s <= 0:
        return None
    good = sum(1 for r in requests if all(t.met(*r) for t in targets))
    return good / duration_s


def comparable_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A stored benchmark config as two runs measured alike share it: the workload's
    measured settings in one form (older records' top-level lengths too), goodput targets
    left out (they judge the figures, they do not change them)."""
    rest = {k: v for k, v in config.items() if k not in ("prompt_tokens", "output_tokens")}
    return {**rest, "workload": workload_of(config).measured_like()}


def parse_concurrency(text: str) -> tuple[int, ...]:
    """`1,4,8` -> (1, 4, 8); every level a positive integer."""
    try:
        levels = tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        levels = ()
    if not levels or any(c < 1 for c in levels):
        raise InputError(
            f"concurrency {text!r} is not a list of positive integers",
            "write it like --concurrency 1,4,8",
        )
    return levels


def parse_share(text: str) -> float:
    """`0.5` or `50%` -> 0.5; a share of at most 0.95 (a prompt all shared is one request)."""
    spec = text.strip()
    try:
        share = float(spec.removesuffix("%")) / (100 if spec.endswith("%") else 1)
    except ValueError:
        share = -1.0
    if not 0 <= share <= 0.95:
        raise InputError(
            f"shared prefix {text!r} is not a share from 0 to 0.95",
            "write it like --shared-prefix 0.5 or --shared-prefix 50%",
        )
    return share

"""Benchmark: a concurrency sweep against an OpenAI-compatible server, measured on the client.

How the figures are taken (all on the client, with `time.perf_counter`):
- TTFT: from just before the request is sent to the arrival of the first streamed chunk that
  carries generated text (answer or reasoning).
- Inter-token latency (ITL): the gaps between successive text-bearing chunks of one reply,
  pooled over every request of a level. With speculative decoding a chunk may carry several
  tokens; the gap is then per chunk, as vLLM's own `bench serve` reports it.
- Output tokens: `usage.completion_tokens` of the final chunk (`stream_options.include_usage`),
  else the number of text-bearing chunks.
- Per-request output tokens/s: (tokens - 1) / (last chunk - first chunk), the decode speed a
  user of that request sees. Total output tokens/s: all tokens of the level / the level's
  wall time (first request sent -> last reply finished). Requests/s: replies completed / the
  same wall time.
- What is sent is the workload (`core.workload`): each request's prompt and output length
  drawn from its distributions or its file (the same seed, the same lengths), the prompt
  built to that many tokens by the server's own tokenizer (`ops.prompts`), at each context
  depth in turn. Output length is forced as vLLM's `bench serve` does, with `max_tokens`
  and `ignore_eos` when the server accepts it (checked with the warm-up request); every
  reply's `usage` is checked against the lengths asked for, and a level counts the misses.
- Goodput: the requests per second of a level that met every per-request target.
- With repeats, each figure has a 95 % confidence interval over them (Student's t).
- `/metrics` is sampled every `metrics_interval_s` (1 s) while a level runs, the first half
  an interval in; per level the max and mean of the KV-cache use and of the running/waiting
  request counts are kept (only those gauges' lines are parsed). Not more
  often: each sample costs the server's API process a render of its whole page (real vLLM
  0.32: about 60 kB and 4 ms of CPU, on the process that streams the tokens being timed) and
  the client a parse, so sampling every 0.25 s took measurable CPU from the engine that
  `vllm bench serve`, which samples nothing, leaves alone.
- Through SSH (our cluster's API), the requests go over direct TCP/IP channels of the head's
  open connection (`transport`), not through the forward's local port: the relay between a
  local socket and the channel cost this machine's CPU on every streamed chunk (a quarter
  of the client's CPU per reply) and a socket hop each way before the first token is seen.
- Prompts are new to the server on every run (a per-run salt): no prefix-cache hits unless
  the workload asks for a shared prefix. vLLM's `bench serve` with its random dataset sends
  the same prompts for the same `--seed`, so a repeated run of it hits the prefix cache and
  shows a shorter TTFT for less prefill work, not for a faster server.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

import httpx
from pydantic.dataclasses import dataclass as record

from spark_tui.core.confidence import mean_ci95
from spark_tui.core.link import LinkFigure, MemoryFigure
from spark_tui.core.workload import GoodputTarget, RequestShape, Workload, goodput_of, workload_of
from spark_tui.ops.events import Emit
from spark_tui.ops.json_records import RECORD_CONFIG, JsonRecord
from spark_tui.ops.prometheus import vllm_gauges
from spark_tui.ops.prompts import PromptBuilder
from spark_tui.ops.smoke import API_KEY_REMEDY, auth_headers, normalize_base_url

METRIC_FIGURES = ("kv_cache_usage_perc", "num_requests_running", "num_requests_waiting")


@record(config=RECORD_CONFIG)
class BenchConfig(JsonRecord):
    """What to measure: concurrency levels, the workload (lengths, shared prefix, context
    depths, goodput targets), requests per level and repeats."""

    concurrency: tuple[int, ...] = (1, 4, 8)
    workload: Workload = field(default_factory=Workload)
    requests_per_level: int = 0  # 0: 2 x concurrency
    repeats: int = 1
    temperature: float = 0.0
    warmup: bool = True
    force_output_length: bool = True
    metrics_interval_s: float = 1.0
    timeout_s: float = 600.0

    @property
    def max_connections(self) -> int:
        """The client's pool: one connection per request in flight, a few spare (the
        `/metrics` sampler's)."""
        return max(self.concurrency, default=1) + 4

    def requests_for(self, concurrency: int) -> int:
        return self.requests_per_level if self.requests_per_level > 0 else 2 * concurrency

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """A stored config, one recorded before workloads (fixed lengths at the top) too."""
        rest = {k: v for k, v in data.items() if k not in ("prompt_tokens", "output_tokens")}
        return super().from_dict({**rest, "workload": workload_of(data)})


@dataclass
class RequestSample:
    """One request's client-side timings."""

    ok: bool
    ttft_s: float | None = None
    latency_s: float | None = None  # request sent -> last text-bearing chunk
    output_tokens: int = 0
    prompt_tokens: int | None = None
    gaps_s: list[float] = field(default_factory=list)
    error: str | None = None
    # What was asked for (None: not known before the request, e.g. no /tokenize).
    requested_prompt: int | None = None
    requested_output: int | None = None

    @property
    def itl_mean_s(self) -> float | None:
        return statistics.fmean(self.gaps_s) if self.gaps_s else None

    @property
    def tokens_per_s(self) -> float | None:
        if not self.ok or self.output_tokens < 2 or self.ttft_s is None or self.latency_s is None:
            return None
        span = self.latency_s - self.ttft_s
        return (self.output_tokens - 1) / span if span > 0 else None


@dataclass
class BenchProgress:
    """Where a running benchmark is: level, repeat, requests done and failed."""

    level_index: int
    levels: int
    concurrency: int
    repeat: int
    done: int
    total: int
    errors: int
    elapsed_s: float
    context_depth: int = 0


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation, None for no values."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


# Figures a level reports, and whether a higher value is better (for comparisons).
FIGURES: dict[str, bool] = {
    "ttft_p50_s": False,
    "ttft_p95_s": False,
    "itl_mean_s": False,
    "itl_p50_s": False,
    "itl_p95_s": False,
    "tps_per_request_mean": True,
    "tps_per_request_p50": True,
    "total_output_tps": True,
    "requests_per_s": True,
    "latency_p50_s": False,
    "goodput_rps": True,
    "errors": False,
}


def level_figures(
    samples: list[RequestSample],
    duration_s: float,
    goodput: tuple[GoodputTarget, ...] = (),
) -> dict[str, float | None]:
    """The per-level figures from its requests and its wall time (goodput: None without
    targets)."""
    ok = [s for s in samples if s.ok]
    ttfts = [s.ttft_s for s in ok if s.ttft_s is not None]
    gaps = [g for s in ok for g in s.gaps_s]
    tps = [t for s in ok if (t := s.tokens_per_s) is not None]
    lat = [s.latency_s for s in ok if s.latency_s is not None]
    tokens = sum(s.output_tokens for s in ok)
    return {
        "ttft_p50_s": percentile(ttfts, 50),
        "ttft_p95_s": percentile(ttfts, 95),
        "itl_mean_s": _mean(gaps),
        "itl_p50_s": percentile(gaps, 50),
        "itl_p95_s": percentile(gaps, 95),
        "tps_per_request_mean": _mean(tps),
        "tps_per_request_p50": percentile(tps, 50),
        "total_output_tps": tokens / duration_s if duration_s > 0 else None,
        "requests_per_s": len(ok) / duration_s if duration_s > 0 else None,
        "latency_p50_s": percentile(lat, 50),
        "goodput_rps": goodput_of(
            goodput, [(s.ttft_s, s.itl_mean_s, s.latency_s) for s in ok], duration_s
        ),
        "errors": float(len(samples) - len(ok)),
    }


@record(config=RECORD_CONFIG)
class LevelResult(JsonRecord):
    """One concurrency level at one context depth: its figures, per-request samples, sampled
    server metrics, and how many replies missed the lengths asked for."""

    concurrency: int
    requests: int
    errors: int
    duration_s: float
    figures: dict[str, float | None]
    output_tokens: int = 0
    prompt_tokens_mean: float | None = None
    # Per-request values kept for the noise estimate of comparisons.
    per_request: dict[str, list[float]] = field(default_factory=dict)
    # Figures of each repeat when the level ran more than once, and each figure's 95 %
    # confidence interval [low, high] over them.
    repeats: list[dict[str, float | None]] = field(default_factory=list)
    ci95: dict[str, list[float]] = field(default_factory=dict)
    context_depth: int = 0
    prompt_tokens_requested_mean: float | None = None
    prompt_length_misses: int = 0
    output_length_misses: int = 0
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    metrics_samples: int = 0
    error_samples: list[str] = field(default_factory=list)


@record(config=RECORD_CONFIG)
class BenchResult(JsonRecord):
    """A whole sweep: its config, each level, and how it ended."""

    base_url: str
    model: str
    config: BenchConfig
    levels: list[LevelResult] = field(default_factory=list)
    started_at: str = ""
    finished_at: str | None = None
    cancelled: bool = False
    forced_length: bool = False
    metrics_available: bool = False
    notes: list[str] = field(default_factory=list)
    # The warm-up and calibration requests before the levels (the server counts them too).
    warmup_requests: int = 0
    warmup_output_tokens: int = 0
    # Sampled on every node of the cluster while it ran (none for a server not of ours):
    # the ranks' interfaces (peak and mean GB/s each way) and each node's least free memory.
    link: list[LinkFigure] = field(default_factory=list)
    memory: list[MemoryFigure] = field(default_factory=list)
    warmup_prompt_tokens: int = 0

    def level(self, concurrency: int, context_depth: int = 0) -> LevelResult | None:
        return next(
            (
                lv
                for lv in self.levels
                if lv.concurrency == concurrency and lv.context_depth == context_depth
            ),
            None,
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class _MetricsSampler:
    """Polls /metrics in the background of one level and keeps the gauges it saw."""

    def __init__(self, client: httpx.AsyncClient, url: str, interval_s: float) -> None:
        self.client = client
        self.url = url
        self.interval_s = interval_s
        self.values: dict[str, list[float]] = {k: [] for k in METRIC_FIGURES}
        self.samples = 0
        self.available = True

    async def sample_once(self) -> None:
        try:
            resp = await self.client.get(self.url, timeout=5.0)
        except httpx.HTTPError:
            return
        if resp.status_code == 404:
            self.available = False
            return
        if resp.status_code != 200:
            return
        gauges = vllm_gauges(resp.text)
        if gauges:
            self.samples += 1
        for k, v in gauges.items():
            self.values[k].append(v)

    async def run(self) -> None:
        # Not at the level's start: nothing runs yet to be seen, and the server would render
        # its page just as the first requests arrive, on the process that admits them.
        await asyncio.sleep(self.interval_s / 2)
        while self.available:
            await self.sample_once()
            await asyncio.sleep(self.interval_s)

    def summary(self) -> dict[str, dict[str, float]]:
        return {
            k: {"max": max(v), "mean": statistics.fmean(v)} for k, v in self.values.items() if v
        }


# What a running benchmark emits: where it is after each request, each level as it finishes.
BenchUpdate = BenchProgress | LevelResult


class BenchRun:
    """One benchmark sweep; `result` holds what was measured so far, even after cancellation.
    `emit` gets a BenchProgress after each request and each LevelResult."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        config: BenchConfig | None = None,
        *,
        api_key: str | None = None,
        emit: Emit[BenchUpdate] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base = normalize_base_url(base_url)
        self._transport = transport
        self.config = config or BenchConfig()
        self.api_key = api_key
        self._emit = emit
        self.result = BenchResult(self.base, model or "", self.config)
        # Per run, so a repeated benchmark on the same server gets no prefix-cache hits
        # beyond the workload's own shared prefix.
        self._salt = f"{secrets.token_hex(3)}-"
        self._extra: dict[str, Any] = {}
        self._prompts: PromptBuilder | None = None

    # -- one request ----------------------------------------------------------------------

    def _body(self, content: str, output_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.result.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": output_tokens,
            "temperature": self.config.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        body.update(self._extra)
        return body

    async def _prepare(
        self, shape: RequestShape, depth: int
    ) -> tuple[dict[str, Any], RequestShape, int | None]:
        """The request body for one shape, and the prompt tokens it should count."""
        assert self._prompts is not None
        prompt = await self._prompts.build(shape, depth)
        return self._body(prompt.content, shape.output_tokens), shape, prompt.tokens

    async def _one(self, client: httpx.AsyncClient, body: dict[str, Any]) -> RequestSample:
        url = self.base + "/v1/chat/completions"
        sent = time.perf_counter()
        first: float | None = None
        last: float | None = None
        chunks = 0
        gaps: list[float] = []
        usage: dict[str, Any] | None = None
        done = False
        try:
            async with client.stream("POST", url, json=body) as resp:
                if resp.status_code != 200:
                    text = (await resp.aread()).decode("utf-8", "replace")
                    return RequestSample(False, error=f"HTTP {resp.status_code}: {text[:200]}")
                async for line in resp.aiter_lines():
                    # Read on to the end of the body after [DONE] (the chunked stream's last
                    # bytes follow it): a reply left unread closes its connection, and the
                    # next request would open another, through the SSH forward a new channel
                    # and on the server a new connection, as no benchmark client does.
                    if done or not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        done = True
                        continue
                    now = time.perf_counter()
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        return RequestSample(False, error=f"chunk is not JSON: {payload[:80]!r}")
                    if isinstance(chunk.get("usage"), dict):
                        usage = chunk["usage"]
                    if "error" in chunk:
                        return RequestSample(False, error=f"error in stream: {chunk['error']}")
                    if _has_text(chunk):
                        if first is None:
                            first = now
                        else:
                            gaps.append(now - (last if last is not None else now))
                        last = now
                        chunks += 1
        except httpx.HTTPError as exc:
            return RequestSample(False, error=f"{type(exc).__name__}: {exc}")
        if not done:
            return RequestSample(False, error="stream ended without data: [DONE]")
        if first is None or last is None:
            return RequestSample(False, error="no generated text in the reply")
        tokens = int(usage.get("completion_tokens") or chunks) if usage else chunks
        prompt = usage.get("prompt_tokens") if usage else None
        return RequestSample(
            True,
            ttft_s=first - sent,
            latency_s=last - sent,
            output_tokens=tokens,
            prompt_tokens=int(prompt) if prompt is not None else None,
            gaps_s=gaps,
        )

    # -- warm-up: compile caches, check ignore_eos support, calibrate without /tokenize ---

    def _count_warmup(self, sample: RequestSample) -> None:
        self.result.warmup_requests += 1 if sample.ok else 0
        self.result.warmup_output_tokens += sample.output_tokens if sample.ok else 0
        self.result.warmup_prompt_tokens += (sample.prompt_tokens or 0) if sample.ok else 0

    async def _warmup(self, client: httpx.AsyncClient) -> None:
        cfg = self.config
        if cfg.force_output_length:
            self._extra = {"ignore_eos": True}
        # A request of the workload's own kind, numbered apart from the measured ones.
        shape = cfg.workload.shapes(10**6, 1)[0]
        body, _, expected = await self._prepare(shape, 0)
        sample = await self._one(client, body)
        self._count_warmup(sample)
        if not sample.ok and self._extra and "400" in (sample.error or ""):
            self.result.notes.append("the server refused ignore_eos: output lengths are not forced")
            self._extra = {}
            body, _, expected = await self._prepare(shape, 0)
            sample = await self._one(client, body)
            self._count_warmup(sample)
        if not sample.ok:
            raise BenchError(
                f"the warm-up request failed: {sample.error}",
                unreachable=(sample.error or "").startswith(("ConnectError", "ConnectTimeout")),
            )
        self.result.forced_length = bool(self._extra)
        prompts = self._prompts
        assert prompts is not None
        if prompts.tokenizer or shape.prompt_tokens is None:
            return
        # No /tokenize: scale the word count so the measured prompts have about the
        # requested token count; one extra cheap request (max_tokens 1) refines it.
        self.result.notes.append(
            "the server has no /tokenize: prompt lengths are approximate (scaled from the "
            "warm-up's usage)"
        )
        for _ in range(2):
            measured = sample.prompt_tokens
            wanted = shape.prompt_tokens
            if not measured or abs(measured - wanted) <= 0.02 * wanted:
                break
            prompts.calibrate(wanted, measured)
            body, _, _ = await self._prepare(shape, 0)
            body["max_tokens"] = 1
            sample = await self._one(client, body)
            self._count_warmup(sample)
            if not sample.ok:
                break

    # -- one level ------------------------------------------------------------------------

    async def _level(
        self,
        client: httpx.AsyncClient,
        where: tuple[int, int, int, int, int],
        requests: list[tuple[dict[str, Any], RequestShape, int | None]],
    ) -> tuple[list[RequestSample], float, _MetricsSampler]:
        index, levels, concurrency, repeat, depth = where
        total = len(requests)
        queue: asyncio.Queue[tuple[dict[str, Any], RequestShape, int | None]] = asyncio.Queue()
        for item in requests:
            queue.put_nowait(item)
        samples: list[RequestSample] = []
        sampler = _MetricsSampler(client, self.base + "/metrics", self.config.metrics_interval_s)
        start = time.perf_counter()

        async def worker() -> None:
            while True:
                try:
                    body, shape, expected = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                sample = await self._one(client, body)
                sample.requested_prompt = expected
                sample.requested_output = shape.output_tokens
                samples.append(sample)
                if self._emit:
                    self._emit(
                        BenchProgress(
                            index,
                            levels,
                            concurrency,
                            repeat,
                            len(samples),
                            total,
                            sum(1 for s in samples if not s.ok),
                            time.perf_counter() - start,
                            depth,
                        )
                    )

        sampler_task = asyncio.create_task(sampler.run())
        try:
            async with asyncio.TaskGroup() as tg:
                for _ in range(min(concurrency, total)):
                    tg.create_task(worker())
        finally:
            sampler_task.cancel()
            try:
                await sampler_task
            except asyncio.CancelledError:
                pass
        duration = time.perf_counter() - start
        return samples, duration, sampler

    async def run(self) -> BenchResult:
        """Run the sweep. Cancelling the task stops in-flight requests and re-raises."""
        cfg = self.config
        if not cfg.concurrency or any(c < 1 for c in cfg.concurrency):
            raise BenchError("concurrency levels must be positive integers")
        workload = cfg.workload.reloaded()
        res = self.result
        res.started_at = _now()
        limits = httpx.Limits(max_connections=cfg.max_connections)
        headers = auth_headers(self.api_key)
        timeout = httpx.Timeout(cfg.timeout_s, connect=5.0)
        depths = workload.context_depths
        levels = len(depths) * len(cfg.concurrency)
        try:
            async with httpx.AsyncClient(
                timeout=timeout,
                limits=limits,
                headers=headers,
                trust_env=False,
                transport=self._transport,
            ) as client:
                if not res.model:
                    res.model = await self._first_model(client)
                self._prompts = PromptBuilder(client, self.base, res.model, workload, self._salt)
                if cfg.warmup or cfg.force_output_length:
                    await self._warmup(client)
                nonce = 0
                for d_index, depth in enumerate(depths):
                    for c_index, conc in enumerate(cfg.concurrency):
                        index = d_index * len(cfg.concurrency) + c_index
                        runs = []
                        for rep in range(max(1, cfg.repeats)):
                            shapes = workload.shapes(nonce, cfg.requests_for(conc))
                            nonce += len(shapes)
                            # Built before the clock starts: tokenizing is not measured.
                            requests = [await self._prepare(sh, depth) for sh in shapes]
                            samples, duration, sampler = await self._level(
                                client, (index, levels, conc, rep, depth), requests
                            )
                            runs.append((samples, duration, sampler))
                        level = _combine_level(conc, runs, workload.goodput, depth)
                        res.metrics_available = res.metrics_available or level.metrics_samples > 0
                        res.levels.append(level)
                        if self._emit:
                            self._emit(level)
        except asyncio.CancelledError:
            res.cancelled = True
            res.finished_at = _now()
            raise
        except httpx.ConnectError as exc:
            raise BenchError(f"cannot reach {self.base}: {exc}", unreachable=True) from exc
        _note_misses(res)
        res.finished_at = _now()
        return res

    async def _first_model(self, client: httpx.AsyncClient) -> str:
        resp = await client.get(self.base + "/v1/models")
        if resp.status_code == 401:
            raise BenchError(
                f"/v1/models answered HTTP 401: the server requires an API key; {API_KEY_REMEDY}"
            )
        if resp.status_code != 200:
            raise BenchError(f"/v1/models answered HTTP {resp.status_code}")
        data = resp.json().get("data") or []
        if not data:
            raise BenchError("the server lists no model")
        return str(data[0]["id"])


def _note_misses(res: BenchResult) -> None:
    """Say when replies did not have the lengths asked for (the figures then measure
    another workload than the one stored with the run)."""
    prompt = sum(lv.prompt_length_misses for lv in res.levels)
    output = sum(lv.output_length_misses for lv in res.levels)
    if prompt:
        res.notes.append(
            f"{prompt} requests' prompts were not the length asked for (the server's usage "
            "counted otherwise than its /tokenize)"
        )
    if output:
        res.notes.append(
            f"{output} replies were not the output length asked for"
            + ("" if res.forced_length else " (lengths are not forced on this server)")
        )


def _has_text(chunk: dict[str, Any]) -> bool:
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        for key in ("content", "reasoning", "reasoning_content"):
            if isinstance(delta.get(key), str) and delta[key]:
                return True
    return False


GAP_SAMPLE = 2000


def _gap_sample(gaps: list[float]) -> list[float]:
    """At most GAP_SAMPLE gaps (evenly spaced, in microseconds' precision) to keep records small."""
    if len(gaps) > GAP_SAMPLE:
        step = len(gaps) / GAP_SAMPLE
        gaps = [gaps[int(i * step)] for i in range(GAP_SAMPLE)]
    return [round(g, 6) for g in gaps]


def _combine_level(
    concurrency: int,
    runs: list[tuple[list[RequestSample], float, _MetricsSampler]],
    goodput: tuple[GoodputTarget, ...] = (),
    context_depth: int = 0,
) -> LevelResult:
    all_samples = [s for samples, _, _ in runs for s in samples]
    duration = sum(d for _, d, _ in runs)
    figures = level_figures(all_samples, duration, goodput)
    ok = [s for s in all_samples if s.ok]
    merged: dict[str, list[float]] = {k: [] for k in METRIC_FIGURES}
    n_metric = 0
    for _, _, sampler in runs:
        n_metric += sampler.samples
        for k, v in sampler.values.items():
            merged[k].extend(v)
    prompts = [float(s.prompt_tokens) for s in ok if s.prompt_tokens is not None]
    asked = [float(s.requested_prompt) for s in ok if s.requested_prompt is not None]
    repeats = (
        [level_figures(samples, d, goodput) for samples, d, _ in runs] if len(runs) > 1 else []
    )
    ci95 = {}
    for name in figures:
        ci = mean_ci95([rep.get(name) for rep in repeats])
        if ci is not None:
            ci95[name] = [ci[0] - ci[1], ci[0] + ci[1]]
    return LevelResult(
        concurrency=concurrency,
        requests=len(all_samples),
        errors=len(all_samples) - len(ok),
        duration_s=duration,
        figures=figures,
        output_tokens=sum(s.output_tokens for s in ok),
        prompt_tokens_mean=_mean(prompts),
        per_request={
            "ttft_s": [s.ttft_s for s in ok if s.ttft_s is not None],
            "latency_s": [s.latency_s for s in ok if s.latency_s is not None],
            "tokens_per_s": [t for s in ok if (t := s.tokens_per_s) is not None],
            "itl_mean_s": [t for s in ok if (t := s.itl_mean_s) is not None],
            "itl_gaps_s": _gap_sample([g for s in ok for g in s.gaps_s]),
        },
        repeats=repeats,
        ci95=ci95,
        context_depth=context_depth,
        prompt_tokens_requested_mean=_mean(asked),
        prompt_length_misses=sum(
            1
            for s in ok
            if s.requested_prompt is not None
            and s.prompt_tokens is not None
            and s.prompt_tokens != s.requested_prompt
        ),
        output_length_misses=sum(
            1
            for s in ok
            if s.requested_output is not None and s.output_tokens != s.requested_output
        ),
        metrics={k: {"max": max(v), "mean": statistics.fmean(v)} for k, v in merged.items() if v},
        metrics_samples=n_metric,
        error_samples=sorted({s.error or "" for s in all_samples if not s.ok})[:5],
    )


class BenchError(Exception):
    """A benchmark that could not run (no model, warm-up failed, server unreachable)."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


async def run_bench(
    base_url: str,
    model: str | None = None,
    config: BenchConfig | None = None,
    *,
    api_key: str | None = None,
    emit: Emit[BenchUpdate] | None = None,
) -> BenchResult:
    """Run a sweep and return its result (see `BenchRun` to keep a partial one on cancel)."""
    return await BenchRun(base_url, model, config, api_key=api_key, emit=emit).run()

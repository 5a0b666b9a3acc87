"""Prometheus `/metrics` of the simulated engine, with vLLM V1's names, HELP texts, buckets and
labels (`engine="0"`, `model_name="..."`; compare shared/reference/vllm_metrics_*.prom).
Written by hand in the text exposition format (standard library only), including the
`_created` gauges prometheus_client adds for counters and histograms."""

from __future__ import annotations

import math
import threading
import time

TTFT_BUCKETS = [
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
]
ITL_BUCKETS = [
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
]
E2E_BUCKETS = [
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
]


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


def token_buckets(max_model_len: int) -> list[float]:
    """vLLM's 1-2-5 buckets up to max_model_len for token-count histograms."""
    out: list[float] = []
    exp = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exp
            if v > max_model_len:
                return out
            out.append(float(v))
        exp += 1


class Histogram:
    """A cumulative histogram."""

    def __init__(self, buckets: list[float]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Record one observation."""
        self.total += 1
        self.sum += value
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1


class EngineMetrics:
    """The counters, gauges and histograms of one engine, rendered on demand."""

    def __init__(
        self, model_name: str, engine: str, max_model_len: int, cache_info: dict[str, str]
    ) -> None:
        self.model_name = model_name
        self.engine = engine
        self.created = time.time()
        self.cache_info = cache_info
        self.lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.preemptions = 0
        self.success: dict[str, int] = {"stop": 0, "length": 0, "abort": 0, "error": 0}
        self.spec_drafts = 0
        self.spec_draft_tokens = 0
        self.spec_accepted = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.queue_time = Histogram(E2E_BUCKETS)
        self.prompt_hist = Histogram(token_buckets(max_model_len))
        self.gen_hist = Histogram(token_buckets(max_model_len))

    def _labels(self, extra: list[tuple[str, str]] | None = None) -> str:
        pairs = [("engine", self.engine)] + (extra or []) + [("model_name", self.model_name)]
        pairs.sort(key=lambda kv: kv[0])
        return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"

    def render(self) -> str:
        """The exposition text."""
        with self.lock:
            return self._render()

    def _render(self) -> str:
        out: list[str] = []
        created = go_float(self.created)

        def family(
            name: str, kind: str, help_text: str, samples: list[tuple[str, str, float]]
        ) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            for suffix, labels, value in samples:
                out.append(f"{name}{suffix}{labels} {go_float(value)}")
            if kind in ("counter", "histogram"):
                base = name[: -len("_total")] if name.endswith("_total") else name
                out.append(f"# HELP {base}_created {help_text}")
                out.append(f"# TYPE {base}_created gauge")
                for labels in sorted({lab for _s, lab, _v in samples if 'le="' not in lab}):
                    out.append(f"{base}_created{labels} {created}")

        def gauge(name: str, help_text: str, value: float) -> None:
            family(name, "gauge", help_text, [("", self._labels(), value)])

        def counter(name: str, help_text: str, value: float) -> None:
            family(name, "counter", help_text, [("", self._labels(), value)])

        def histogram(name: str, help_text: str, h: Histogram) -> None:
            samples: list[tuple[str, str, float]] = []
            for bound, count in zip(h.buckets, h.counts):
                samples.append(("_bucket", self._labels([("le", go_float(bound))]), count))
            samples.append(("_bucket", self._labels([("le", "+Inf")]), h.total))
            samples.append(("_count", self._labels(), h.total))
            samples.append(("_sum", self._labels(), h.sum))
            family(name, "histogram", help_text, samples)

        gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            self.running,
        )
        gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", self.waiting
        )
        gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", self.kv_usage
        )
        counter(
            "vllm:prefix_cache_queries_total",
            "Prefix cache queries, in terms of number of queried tokens.",
            self.prefix_queries,
        )
        counter(
            "vllm:prefix_cache_hits_total",
            "Prefix cache hits, in terms of number of cached tokens.",
            self.prefix_hits,
        )
        counter(
            "vllm:num_preemptions_total",
            "Cumulative number of preemption from the engine.",
            self.preemptions,
        )
        counter(
            "vllm:prompt_tokens_total", "Number of prefill tokens processed.", self.prompt_tokens
        )
        counter(
            "vllm:generation_tokens_total",
            "Number of generation tokens processed.",
            self.generation_tokens,
        )
        reasons = [
            ("", self._labels([("finished_reason", r)]), float(n)) for r, n in self.success.items()
        ]
        family(
            "vllm:request_success_total",
            "counter",
            "Count of successfully processed requests.",
            reasons,
        )
        histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", self.prompt_hist
        )
        histogram(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            self.gen_hist,
        )
        histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            self.ttft,
        )
        histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            self.itl,
        )
        histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            self.e2e,
        )
        histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            self.queue_time,
        )
        if self.spec_drafts:
            counter(
                "vllm:spec_decode_num_drafts_total",
                "Number of spec decoding drafts.",
                self.spec_drafts,
            )
            counter(
                "vllm:spec_decode_num_draft_tokens_total",
                "Number of draft tokens.",
                self.spec_draft_tokens,
            )
            counter(
                "vllm:spec_decode_num_accepted_tokens_total",
                "Number of accepted tokens.",
                self.spec_accepted,
            )
        info = sorted(self.cache_info.items())
        labels = "{" + ",".join(f'{k}="{v}"' for k, v in info) + "}"
        out.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig")
        out.append("# TYPE vllm:cache_config_info gauge")
        out.append(f"vllm:cache_config_info{labels} 1.0")
        return "\n".join(out) + "\n"

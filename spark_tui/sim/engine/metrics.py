"""Prometheus `/metrics` of the simulated engine: every `vllm:` family real vLLM 0.32 serves
for one engine (names, types, HELP texts, buckets and labels of vllm/v1/metrics/loggers.py;
held against tests/fixtures/vllm-0.32.0-cpu-metrics*.prom), moved as vLLM moves them: the
scheduler gauges at every step, token counters as tokens are processed, and the per-request
histograms when a request finishes."""

from __future__ import annotations

import threading
import time

from spark_tui.sim.engine.exposition import Histogram, Labels, Writer

REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REQUEST_PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
REQUEST_NUM_PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)

FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHE_HIT_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")
# vLLM 0.32's CacheConfig as `vllm:cache_config_info` labels it (every field, str()-ed), at
# its defaults; the engine's own values replace these.
CACHE_CONFIG_DEFAULTS = {
    "block_size": "16",
    "user_specified_block_size": "False",
    "kv_cache_layout": "None",
    "prefix_match_unit": "None",
    "gpu_memory_utilization": "0.92",
    "cache_dtype": "auto",
    "is_attention_free": "False",
    "num_gpu_blocks_override": "None",
    "sliding_window": "None",
    "enable_prefix_caching": "True",
    "prefix_caching_hash_algo": "sha256",
    "prefix_cache_retention_interval": "0",
    "kv_cache_dtype_skip_layers": "[]",
    "mamba_page_size_padded": "None",
    "skip_page_size_padded": "None",
    "mamba_block_size": "None",
    "mamba_cache_dtype": "auto",
    "mamba_ssm_cache_dtype": "auto",
    "mamba_cache_mode": "none",
    "enable_mamba_shared_prefix_checkpoint": "False",
    "replayssm_buffer_len": "16",
    "use_replayssm": "False",
    "use_kda_recoverssm": "False",
    "num_gpu_blocks": "None",
    "num_cpu_blocks": "None",
    "effective_attention_block_size": "None",
    "kv_cache_size_tokens": "None",
    "kv_cache_max_concurrency": "None",
    "hash_block_size": "None",
    "cache_hit_alignment_tokens": "None",
    "kv_sharing_fast_prefill": "False",
    "swa_bounded_replay": "True",
    "kv_cache_memory_bytes": "None",
    "kv_offloading_size": "None",
    "kv_offloading_backend": "native",
    "_block_size_resolved": "True",
}

# Per-request histograms: name -> (HELP, bucket family).
_REQUEST_HISTOGRAMS: dict[str, tuple[str, str]] = {
    "vllm:request_prompt_tokens": ("Number of prefill tokens processed.", "tokens"),
    "vllm:request_generation_tokens": ("Number of generation tokens processed.", "tokens"),
    "vllm:iteration_tokens_total": (
        "Histogram of number of tokens per engine_step.",
        "iteration",
    ),
    "vllm:request_max_num_generation_tokens": (
        "Histogram of maximum number of requested generation tokens.",
        "tokens",
    ),
    "vllm:request_params_n": ("Histogram of the n request parameter.", "n"),
    "vllm:request_params_max_tokens": (
        "Histogram of the max_tokens request parameter.",
        "tokens",
    ),
    "vllm:time_to_first_token_seconds": (
        "Histogram of time to first token in seconds.",
        "ttft",
    ),
    "vllm:inter_token_latency_seconds": ("Histogram of inter-token latency in seconds.", "itl"),
    "vllm:request_time_per_output_token_seconds": (
        "Histogram of time_per_output_token_seconds per request.",
        "itl",
    ),
    "vllm:e2e_request_latency_seconds": (
        "Histogram of e2e request latency in seconds.",
        "latency",
    ),
    "vllm:request_queue_time_seconds": (
        "Histogram of time spent in WAITING phase for request.",
        "latency",
    ),
    "vllm:request_inference_time_seconds": (
        "Histogram of time spent in RUNNING phase for request.",
        "latency",
    ),
    "vllm:request_prefill_time_seconds": (
        "Histogram of time spent in PREFILL phase for request.",
        "latency",
    ),
    "vllm:request_decode_time_seconds": (
        "Histogram of time spent in DECODE phase for request.",
        "latency",
    ),
    "vllm:request_num_preemptions": (
        "Number of preemptions per request.",
        "preemptions",
    ),
    "vllm:request_prefill_kv_computed_tokens": (
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        "tokens",
    ),
}


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


class EngineMetrics:
    """The counters, gauges and histograms of one engine, rendered on demand. The scheduler
    updates the plain fields under `lock` and reports steps and finished requests."""

    def __init__(
        self,
        model_name: str,
        engine: str,
        max_model_len: int,
        cache_info: dict[str, str],
        num_speculative_tokens: int = 0,
    ) -> None:
        self.model_name = model_name
        self.engine = engine
        self.created = time.time()
        self.cache_info = cache_info
        self.lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.preemptions = 0
        self.prompt_tokens = 0  # every prompt token of a prefill done (cached ones too)
        self.prompt_cached = 0
        self.generation_tokens = 0
        self.success: dict[str, int] = {r: 0 for r in FINISH_REASONS}
        self.num_speculative_tokens = num_speculative_tokens
        self.spec_drafts = 0
        self.spec_draft_tokens = 0
        self.spec_accepted = 0
        self.spec_accepted_per_pos = [0] * num_speculative_tokens
        families = {
            "tokens": token_buckets(max_model_len),
            "iteration": list(ITERATION_TOKENS_BUCKETS),
            "n": list(REQUEST_PARAMS_N_BUCKETS),
            "ttft": list(TTFT_BUCKETS),
            "itl": list(ITL_BUCKETS),
            "latency": list(REQUEST_LATENCY_BUCKETS),
            "preemptions": list(REQUEST_NUM_PREEMPTIONS_BUCKETS),
        }
        self.hist: dict[str, Histogram] = {
            name: Histogram(families[fam]) for name, (_h, fam) in _REQUEST_HISTOGRAMS.items()
        }
        self.ttft = self.hist["vllm:time_to_first_token_seconds"]
        self.itl = self.hist["vllm:inter_token_latency_seconds"]
        self.e2e = self.hist["vllm:e2e_request_latency_seconds"]
        self.queue_time = self.hist["vllm:request_queue_time_seconds"]

    # -- what the scheduler reports (call with `lock` held) ------------------------------

    def prefill_done(self, prompt_len: int, cached: int) -> None:
        """A request's prefill ended with its first token: its prompt counts, by source."""
        self.prompt_tokens += prompt_len
        self.prompt_cached += cached

    def step_done(self, tokens: int) -> None:
        """One engine step processed `tokens` (prompt chunks plus generated tokens)."""
        self.hist["vllm:iteration_tokens_total"].observe(tokens)

    def spec_step(self, drafted: int, accepted: int) -> None:
        """One draft of `drafted` tokens of which the first `accepted` were kept."""
        self.spec_drafts += 1
        self.spec_draft_tokens += drafted
        self.spec_accepted += accepted
        for pos in range(min(accepted, len(self.spec_accepted_per_pos))):
            self.spec_accepted_per_pos[pos] += 1

    def finished(
        self,
        reason: str,
        times: dict[str, float],
        prompt_len: int,
        generated: int,
        cached: int,
        preemptions: int,
        max_tokens: int | None,
    ) -> None:
        """A request ended: its reason, and (unless aborted before it ran) its histograms.
        `times` holds e2e, queue, prefill, decode and inference seconds (vLLM's phases)."""
        self.success[reason if reason in self.success else "stop"] += 1
        h = self.hist
        h["vllm:e2e_request_latency_seconds"].observe(times["e2e"])
        h["vllm:request_queue_time_seconds"].observe(times["queue"])
        h["vllm:request_prefill_time_seconds"].observe(times["prefill"])
        h["vllm:request_inference_time_seconds"].observe(times["inference"])
        h["vllm:request_decode_time_seconds"].observe(times["decode"])
        h["vllm:request_num_preemptions"].observe(preemptions)
        h["vllm:request_prefill_kv_computed_tokens"].observe(prompt_len - max(cached, 0))
        h["vllm:request_prompt_tokens"].observe(prompt_len)
        h["vllm:request_generation_tokens"].observe(generated)
        tpot = times["decode"] / (generated - 1) if generated > 1 else 0.0
        h["vllm:request_time_per_output_token_seconds"].observe(tpot)
        if max_tokens:
            h["vllm:request_params_max_tokens"].observe(max_tokens)
        # One choice per request (n=1): vLLM records n and the longest choice's tokens.
        h["vllm:request_params_n"].observe(1)
        h["vllm:request_max_num_generation_tokens"].observe(generated)

    # -- rendering ---------------------------------------------------------------------------

    def _labels(self, *extra: tuple[str, str]) -> Labels:
        return [("engine", self.engine), ("model_name", self.model_name), *extra]

    def render(self) -> str:
        """The exposition text."""
        with self.lock:
            return self._render()

    def _render(self) -> str:
        w = Writer(self.created)
        one = self._labels()
        w.gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            [(one, self.running)],
        )
        w.gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            [(one, self.waiting)],
        )
        w.gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
            "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, "
            "KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
            [
                (self._labels(("reason", "capacity")), self.waiting),
                (self._labels(("reason", "deferred")), 0),
            ],
        )
        w.gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
            "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep "
            "level 2.",
            [(self._labels(("sleep_state", s)), 1 if s == "awake" else 0) for s in SLEEP_STATES],
        )
        w.gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            [(one, self.kv_usage)],
        )
        counters: list[tuple[str, str, float]] = [
            (
                "vllm:prefix_cache_queries",
                "Prefix cache queries, in terms of number of queried tokens.",
                self.prefix_queries,
            ),
            (
                "vllm:prefix_cache_hits",
                "Prefix cache hits, in terms of number of cached tokens.",
                self.prefix_hits,
            ),
            (
                "vllm:external_prefix_cache_queries",
                "External prefix cache queries from KV connector cross-instance cache "
                "sharing, in terms of number of queried tokens.",
                0,
            ),
            (
                "vllm:external_prefix_cache_hits",
                "External prefix cache hits from KV connector cross-instance cache sharing, "
                "in terms of number of cached tokens.",
                0,
            ),
            (
                "vllm:mm_cache_queries",
                "Multi-modal cache queries, in terms of number of queried items.",
                0,
            ),
            (
                "vllm:mm_cache_hits",
                "Multi-modal cache hits, in terms of number of cached items.",
                0,
            ),
            (
                "vllm:num_preemptions",
                "Cumulative number of preemption from the engine.",
                self.preemptions,
            ),
            ("vllm:prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens),
        ]
        for name, help_text, value in counters:
            w.counter(name, help_text, [(one, value)])
        by_source = {
            "local_compute": self.prompt_tokens - self.prompt_cached,
            "local_cache_hit": self.prompt_cached,
            "external_kv_transfer": 0,
        }
        w.counter(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            [(self._labels(("source", s)), by_source[s]) for s in PROMPT_SOURCES],
        )
        w.counter(
            "vllm:prompt_tokens_cached",
            "Number of cached prompt tokens (local + external).",
            [(one, self.prompt_cached)],
        )
        w.counter(
            "vllm:prompt_tokens_cached_by_source",
            "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), "
            "host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
            "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
            "vllm:external_prefix_cache_hits.",
            [
                (self._labels(("source", s)), self.prefix_hits if s == "device" else 0)
                for s in CACHE_HIT_SOURCES
            ],
        )
        w.counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            [(one, self.generation_tokens)],
        )
        w.counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [(self._labels(("finished_reason", r)), self.success[r]) for r in FINISH_REASONS],
        )
        w.counter(
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            [([("model_name", self.model_name), ("reason", r)], 0) for r in ADMISSION_REASONS],
        )
        for name, (help_text, _fam) in _REQUEST_HISTOGRAMS.items():
            w.histogram(name, help_text, one, self.hist[name])
        if self.num_speculative_tokens:
            self._render_spec(w)
        # Estimated only with --enable-mfu-metrics (the stand-in has no such figures).
        for what in ("flops", "read_bytes", "write_bytes"):
            kind = "floating point operations" if what == "flops" else what.replace("_", " ")
            where = "read from memory" if what == "read_bytes" else "written to memory"
            w.counter(
                f"vllm:estimated_{what}_per_gpu",
                f"Estimated number of {kind} per GPU (for Model Flops Utilization calculations)."
                if what == "flops"
                else f"Estimated number of bytes {where} per GPU (for Model Flops Utilization "
                "calculations).",
                [(one, 0)],
            )
        info = sorted({**CACHE_CONFIG_DEFAULTS, **self.cache_info, "engine": self.engine}.items())
        w.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", [(info, 1)])
        return w.text()

    def _render_spec(self, w: Writer) -> None:
        one = self._labels()
        w.counter(
            "vllm:spec_decode_num_drafts",
            "Number of spec decoding drafts.",
            [(one, self.spec_drafts)],
        )
        w.counter(
            "vllm:spec_decode_num_draft_tokens",
            "Number of draft tokens.",
            [(one, self.spec_draft_tokens)],
        )
        w.counter(
            "vllm:spec_decode_num_accepted_tokens",
            "Number of accepted tokens.",
            [(one, self.spec_accepted)],
        )
        w.counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            [
                (self._labels(("position", str(pos))), n)
                for pos, n in enumerate(self.spec_accepted_per_pos)
            ],
        )

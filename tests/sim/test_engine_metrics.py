"""The stand-in's /metrics move as real vLLM 0.32's do (vllm/v1/metrics/loggers.py, stats.py):
gauges show the requests in flight, token counters and the per-request histograms rise with
what was served, and the relations vLLM's own page keeps between families hold.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from engine_harness import Engine, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
import standin_compare as sc  # noqa: E402  (the lab comparison's requests)

SERVED = "tiny-qwen2"
# The lab recipe's flags (real vLLM ran them on the tiny local model; the stand-in runs a
# model of its catalogue under the same served name).
SERVE_FLAGS = (
    "--served-model-name",
    SERVED,
    "--max-model-len",
    "2048",
    "--dtype",
    "float32",
    "--enforce-eager",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
)


@pytest.fixture(scope="module")
def stand_in() -> Iterator[str]:
    port = free_port()
    engine = Engine(
        ["serve", "Qwen/Qwen3-0.6B", "--host", "127.0.0.1", "--port", str(port), *SERVE_FLAGS]
    )
    try:
        engine.wait_healthy(port, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def pages(stand_in: str) -> dict[str, str]:
    """The stand-in's /metrics before and after the same requests real vLLM got."""
    before = httpx.get(stand_in + "/metrics", timeout=30).text
    sc.send(stand_in, SERVED)
    after = httpx.get(stand_in + "/metrics", timeout=30).text
    return {"before": before, "after": after}


def _total(page: str, sample: str, **labels: str) -> float:
    total = 0.0
    for line in page.splitlines():
        if line.startswith(sample + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _relations(page: str) -> dict[str, tuple[float, float]]:
    """Pairs that real vLLM keeps equal on every page."""
    t = _total
    finished = t(page, "vllm:request_success_total") - t(
        page, "vllm:request_success_total", finished_reason="abort"
    )
    by_source = t(page, "vllm:prompt_tokens_by_source_total")
    return {
        "prompt tokens: counter vs per-request histogram": (
            t(page, "vllm:prompt_tokens_total"),
            t(page, "vllm:request_prompt_tokens_sum"),
        ),
        "prompt tokens: counter vs sum by source": (t(page, "vllm:prompt_tokens_total"), by_source),
        "generation tokens: counter vs per-request histogram": (
            t(page, "vllm:generation_tokens_total"),
            t(page, "vllm:request_generation_tokens_sum"),
        ),
        "finished requests vs TTFT observations": (
            finished,
            t(page, "vllm:time_to_first_token_seconds_count"),
        ),
        "finished requests vs e2e observations": (
            finished,
            t(page, "vllm:e2e_request_latency_seconds_count"),
        ),
        "ITL observations vs tokens after the first": (
            t(page, "vllm:inter_token_latency_seconds_count"),
            t(page, "vllm:generation_tokens_total") - finished,
        ),
        "cached prompt tokens vs prefix cache hits": (
            t(page, "vllm:prompt_tokens_cached_total"),
            t(page, "vllm:prefix_cache_hits_total"),
        ),
    }


def test_the_stand_in_keeps_the_relations_of_real_vllms_page(pages: dict[str, str]) -> None:
    sim = _relations(pages["after"])
    wrong = {name: pair for name, pair in sim.items() if pair[0] != pair[1]}
    assert not wrong, wrong


def test_gauges_show_the_load_and_counters_rise_with_it(stand_in: str) -> None:
    before = httpx.get(stand_in + "/metrics", timeout=30).text
    body = {
        "model": SERVED,
        "messages": [{"role": "user", "content": "Count to one hundred."}],
        "max_tokens": 200,
        "min_tokens": 200,
        "ignore_eos": True,
    }
    seen_running = 0.0
    with ThreadPoolExecutor(8) as pool:
        jobs = [
            pool.submit(httpx.post, stand_in + "/v1/chat/completions", json=body, timeout=120)
            for _ in range(8)
        ]
        while not all(j.done() for j in jobs):
            page = httpx.get(stand_in + "/metrics", timeout=30).text
            seen_running = max(seen_running, _total(page, "vllm:num_requests_running"))
        assert all(j.result().status_code == 200 for j in jobs)
    after = httpx.get(stand_in + "/metrics", timeout=30).text
    assert seen_running >= 2, "num_requests_running never showed the concurrent requests"
    assert _total(after, "vllm:num_requests_running") == 0

    def delta(sample: str, **labels: str) -> float:
        return _total(after, sample, **labels) - _total(before, sample, **labels)

    assert delta("vllm:request_success_total", finished_reason="length") == 8
    assert delta("vllm:generation_tokens_total") == 8 * 200
    assert delta("vllm:request_params_max_tokens_sum") == 8 * 200
    assert delta("vllm:inter_token_latency_seconds_count") == 8 * 199
    for phase in ("queue", "prefill", "decode", "inference"):
        assert delta(f"vllm:request_{phase}_time_seconds_count") == 8
    assert delta("vllm:request_decode_time_seconds_sum") > 0
    assert delta("vllm:iteration_tokens_total_count") >= 200  # one per engine step
    assert delta("vllm:iteration_tokens_total_sum") == delta(
        "vllm:generation_tokens_total"
    ) + delta("vllm:prompt_tokens_by_source_total", source="local_compute")

"""The stand-in's /metrics move as real vLLM 0.32's do (vllm/v1/metrics/loggers.py, stats.py):
token counters and the per-request histograms rise with what was served, and the relations
vLLM's own page keeps between families hold (test_standin_metrics_vs_real.py checks them on
real vLLM's page). num_requests_running under load: test_engine_timing.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from engine_harness import Engine, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
import standin_compare as sc  # noqa: E402  (the lab comparison's requests and parsing)

SERVED = "tiny-qwen2"
SERVE_FLAGS = (
    "--served-model-name",
    SERVED,
    "--max-model-len",
    "2048",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
)


@pytest.fixture(scope="module")
def stand_in() -> Iterator[str]:
    port = free_port()
    argv = ["serve", "Qwen/Qwen3-0.6B", "--host", "127.0.0.1", "--port", str(port)]
    engine = Engine([*argv, *SERVE_FLAGS])
    try:
        engine.wait_healthy(port, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        engine.stop()


def test_the_stand_in_keeps_the_relations_of_real_vllms_page(stand_in: str) -> None:
    sc.send(stand_in, SERVED)  # the lab comparison's requests, errors included
    page = httpx.get(stand_in + "/metrics", timeout=30).text
    assert sc.metric_total(page, "vllm:request_success_total") >= 4
    wrong = {name: pair for name, pair in sc.relations(page).items() if pair[0] != pair[1]}
    assert not wrong, wrong


def test_counters_and_histograms_rise_with_what_was_served(stand_in: str) -> None:
    before = httpx.get(stand_in + "/metrics", timeout=30).text
    body = {
        "model": SERVED,
        "messages": [{"role": "user", "content": "Count to one hundred."}],
        "max_tokens": 200,
        "min_tokens": 200,
        "ignore_eos": True,
    }
    with ThreadPoolExecutor(8) as pool:
        jobs = [
            pool.submit(httpx.post, stand_in + "/v1/chat/completions", json=body, timeout=120)
            for _ in range(8)
        ]
        assert all(j.result().status_code == 200 for j in jobs)
    after = httpx.get(stand_in + "/metrics", timeout=30).text
    assert sc.metric_total(after, "vllm:num_requests_running") == 0

    def delta(sample: str, **labels: str) -> float:
        return sc.metric_total(after, sample, **labels) - sc.metric_total(before, sample, **labels)

    assert delta("vllm:request_success_total", finished_reason="length") == 8
    assert delta("vllm:generation_tokens_total") == 8 * 200
    assert delta("vllm:request_params_max_tokens_sum") == 8 * 200
    assert delta("vllm:request_params_n_count") == 8
    assert delta("vllm:request_max_num_generation_tokens_sum") == 8 * 200
    assert delta("vllm:inter_token_latency_seconds_count") == 8 * 199
    for phase in ("queue", "prefill", "decode", "inference"):
        assert delta(f"vllm:request_{phase}_time_seconds_count") == 8
    assert delta("vllm:request_decode_time_seconds_sum") > 0
    assert delta("vllm:iteration_tokens_total_count") >= 200  # one per engine step
    computed = delta("vllm:prompt_tokens_by_source_total", source="local_compute")
    assert computed > 0
    assert (
        delta("vllm:iteration_tokens_total_sum") == delta("vllm:generation_tokens_total") + computed
    )


def test_the_tool_parser_counter_counts_choices_and_deltas_as_vllm_does(stand_in: str) -> None:
    """vllm:tool_call_parser_invocations_total: once per non-streaming choice the parser
    reads, once per streamed delta; never for a request without tools."""
    before = httpx.get(stand_in + "/metrics", timeout=30).text
    weather = {"model": SERVED, "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    plain = {"model": SERVED, "messages": [{"role": "user", "content": "Say hi."}]}
    tools = {"tools": [sc.WEATHER_TOOL], "max_tokens": 64}
    stream = {"stream": True, "stream_options": {"include_usage": True}}
    httpx.post(stand_in + "/v1/chat/completions", json={**plain, "max_tokens": 16}, timeout=60)
    httpx.post(
        stand_in + "/v1/chat/completions", json={**plain, "max_tokens": 16, **stream}, timeout=60
    )
    reply = httpx.post(stand_in + "/v1/chat/completions", json={**weather, **tools}, timeout=60)
    called = bool(reply.json()["choices"][0]["message"].get("tool_calls"))
    streamed = httpx.post(
        stand_in + "/v1/chat/completions", json={**weather, **tools, **stream}, timeout=60
    ).text
    events = [json.loads(line[6:]) for line in streamed.splitlines() if line.startswith("data: {")]
    deltas = [
        d
        for ev in events
        for d in [(ev.get("choices") or [{}])[0].get("delta") or {}]
        if "role" not in d and ("content" in d or "tool_calls" in d)
    ]
    after = httpx.get(stand_in + "/metrics", timeout=30).text

    def delta(**labels: str) -> float:
        name = "vllm:tool_call_parser_invocations_total"
        return sc.metric_total(after, name, **labels) - sc.metric_total(before, name, **labels)

    outcome = "tool_call" if called else "no_tool_call"
    assert delta(mode="non_streaming") == 1
    assert delta(mode="non_streaming", outcome=outcome) == 1
    assert delta(mode="streaming") == len(deltas) > 1
    assert delta(request_type="chat_completions") == 1 + len(deltas)

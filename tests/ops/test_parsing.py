"""Prometheus and SSE parsing against the real vLLM samples in tests/fixtures/."""

from __future__ import annotations

import math
from pathlib import Path

from spark_tui.ops.prometheus import parse_prometheus, vllm_gauges
from spark_tui.ops.smoke import parse_sse_chat

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def sample(name: str) -> str:
    """A reference sample without its `# source:` line."""
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("# source:"))


def test_v1_gauges_with_old_cache_name() -> None:
    gauges = vllm_gauges(sample("vllm_metrics_v1_v08_excerpt.prom"))
    assert gauges == {
        "kv_cache_usage_perc": 0.0,
        "num_requests_running": 0.0,
        "num_requests_waiting": 0.0,
    }


def test_truncated_last_line_is_skipped() -> None:
    text = sample("vllm_metrics_v0_prompt_tokens_ttft_excerpt.prom")
    samples = parse_prometheus(text)
    names = {s.name for s in samples}
    assert "vllm:generation_tokens_total" in names
    buckets = [s for s in samples if s.name == "vllm:time_to_first_token_seconds_bucket"]
    # The last bucket line is cut mid-label in the source: it must not be half-parsed.
    assert [b.labels["le"] for b in buckets][-1] == "0.08"
    assert buckets[-1].value == 213.0
    # The V0 CPU swap gauge is not the KV cache: no kv figure from this server.
    assert "kv_cache_usage_perc" not in vllm_gauges(text)


def test_engine_labels_and_scientific_values() -> None:
    samples = parse_prometheus(sample("vllm_metrics_v0100_engine_label_excerpt.prom"))
    created = next(s for s in samples if s.name.endswith("generation_tokens_created"))
    assert created.labels == {"engine": "0", "model_name": "zai-org/GLM-4.5"}
    assert math.isclose(created.value, 1.7537953269356403e09)
    inf = next(s for s in samples if s.labels.get("le") == "+Inf")
    assert inf.value == 4.0


def test_new_names_sum_engines_and_take_fullest_cache() -> None:
    text = "\n".join(
        [
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
            'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5',
            'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
            'vllm:num_requests_running{engine="1",model_name="m"} 2.0',
            'vllm:num_requests_waiting{engine="0",model_name="a \\"quoted\\" name"} 1.0',
            'vllm:gpu_cache_usage_perc{model_name="m"} 0.9',
        ]
    )
    assert vllm_gauges(text) == {
        "kv_cache_usage_perc": 0.5,
        "num_requests_running": 5.0,
        "num_requests_waiting": 1.0,
    }
    quoted = [s for s in parse_prometheus(text) if s.name == "vllm:num_requests_waiting"]
    assert quoted[0].labels["model_name"] == 'a "quoted" name'


def test_sse_tool_call_stream_is_well_formed() -> None:
    out = parse_sse_chat(sample("vllm_api_stream_sse_tool_call_done.txt").splitlines())
    assert out.problems == []
    assert out.role == "assistant"
    assert out.finish_reason == "tool_calls"
    assert out.tool_calls == {0: {"name": "run_command", "arguments": '{"command": "ls"}'}}


def test_sse_excerpt_without_role_and_done_is_reported() -> None:
    out = parse_sse_chat(sample("vllm_api_stream_sse_content_finish_stop.txt").splitlines())
    assert out.content == "가요?"
    assert out.finish_reason == "stop"
    assert "no role delta" in out.problems
    assert "stream did not end with data: [DONE]" in out.problems


def test_sse_reasoning_sent_under_both_names_is_taken_once() -> None:
    out = parse_sse_chat(sample("vllm_api_stream_sse_reasoning_deltas_excerpt.txt").splitlines())
    assert out.reasoning == "好的，用户"
    assert out.content == ""
    assert "no content deltas" in out.problems


def test_sse_usage_chunks_and_data_after_done() -> None:
    lines = sample("vllm_api_stream_sse_usage_per_chunk_excerpt.txt").splitlines()
    out = parse_sse_chat(lines + ["data: [DONE]", 'data: {"choices": []}'])
    assert out.content == " **Core Idea:**"
    assert out.usage == {"prompt_tokens": 16, "total_tokens": 21, "completion_tokens": 5}
    assert "data after [DONE]" in out.problems


def test_sse_garbage_is_not_json() -> None:
    out = parse_sse_chat(["data: {not json", "hello", "data: [DONE]"])
    assert any("not JSON" in p for p in out.problems)
    assert any("not an SSE field line" in p for p in out.problems)

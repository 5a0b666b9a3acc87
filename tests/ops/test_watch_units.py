"""The watch's pure parts: gauges and token rates from real /metrics, what counts as a failure,
the verdict of a cluster from its containers."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui.ops.cluster import ClusterStatus, RankStatus
from spark_tui.ops.diagnose import verdict
from spark_tui.ops.events import ContainerStates, ProbeResult, RankContainer
from spark_tui.ops.watch import HUNG_AFTER, gauges_from, is_failure

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _metrics(generation: float, prompt: float) -> str:
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="m"} 1.0\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25\n'
        f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {generation}\n'
        f'vllm:generation_tokens_created{{engine="0",model_name="m"}} 1.75e+09\n'
        f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt}\n'
    )


def test_gauges_and_rates_from_two_samples() -> None:
    first, counters = gauges_from(_metrics(1000, 50), None, now=10.0)
    assert (first.running, first.waiting, first.kv_cache_usage) == (3.0, 1.0, 0.25)
    assert first.generation_tokens_per_s is None  # a rate needs two samples
    second, _ = gauges_from(_metrics(1600, 250), (10.0, counters), now=12.0)
    assert second.generation_tokens_per_s == pytest.approx(300.0)
    assert second.prompt_tokens_per_s == pytest.approx(100.0)
    # A restarted server's counters go back: no negative rate.
    third, _ = gauges_from(_metrics(10, 5), (12.0, {"generation": 1600.0, "prompt": 250.0}), 14.0)
    assert third.generation_tokens_per_s is None


def test_counters_of_a_real_v0_exposition() -> None:
    text = (FIXTURES / "vllm_metrics_v0_prompt_tokens_ttft_excerpt.prom").read_text()
    _, counters = gauges_from(text, None, now=0.0)
    assert counters == {"generation": 218152.0, "prompt": 1196.0}


def test_what_is_a_failure() -> None:
    up = RankContainer(0, "a", "c0", "running", "Up 1 minute")
    down = RankContainer(1, "b", "c1", "exited", "Exited (137) 1 second ago")
    assert not is_failure(ContainerStates((up,)), 0)
    assert is_failure(ContainerStates((up, down)), 0)
    assert is_failure(ContainerStates((up,), missing=(1,)), 0)
    assert is_failure(ProbeResult(False, 0.1, 500, "EngineCore encountered an issue."), 0)
    assert not is_failure(ProbeResult(False, 0.1, 401, "unauthorised"), 0)
    # A broken connection (the link, not the engine) is not a failure by itself.
    assert not is_failure(ProbeResult(False, 0.1, None, "no answer: ReadError"), 5)
    hung = ProbeResult(False, 10.0, None, "no token within 10 s", timed_out=True)
    assert not is_failure(hung, HUNG_AFTER - 1)
    assert is_failure(hung, HUNG_AFTER)


def _cluster(*states: str) -> ClusterStatus:
    ranks = [RankStatus(i, f"n{i}", f"c{i}", s, "") for i, s in enumerate(states)]
    return ClusterStatus("abc", "r", "h", "m", ranks)


def _info(code: int, oom: bool = False) -> dict[str, object]:
    return {"State": {"Running": False, "ExitCode": code, "OOMKilled": oom}}


def test_verdict_tells_failed_from_stopped() -> None:
    assert verdict(_cluster("running", "running"), {}) == "running"
    assert verdict(_cluster("running", "exited"), {1: _info(137)}) == "failed"
    assert verdict(_cluster("exited", "exited"), {0: _info(1), 1: _info(137)}) == "failed"
    assert verdict(_cluster("exited", "exited"), {0: _info(143), 1: _info(0)}) == "stopped"
    assert verdict(_cluster("exited"), {0: _info(0, oom=True)}) == "failed"

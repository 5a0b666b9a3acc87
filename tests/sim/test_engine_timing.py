"""The SIMULATED timing model moves the numbers the way real hardware does: more batching
gives more total throughput, bigger prefill chunks a lower time to first token, prefix caching
skips a repeated prefix, MTP gives more tokens per step."""

from __future__ import annotations

import threading
import time

import httpx
from engine_harness import Engine, free_port, serve_argv

from spark_tui.sim.engine.generate import Piece
from spark_tui.sim.engine.metrics import EngineMetrics
from spark_tui.sim.engine.scheduler import Request, Scheduler
from spark_tui.sim.engine.timing import TimingModel

GB = 1e9


def dense_model(scale: float = 1.0, spec_tokens: int = 0, tp: int = 1) -> TimingModel:
    return TimingModel(
        weight_bytes_rank=16.4 * GB,
        expert_fraction=0.0,
        experts_total=0,
        experts_active=0,
        params_active_rank=8.2e9,
        kv_bytes_per_token=147456.0,
        hidden_size=4096,
        layers=36,
        tp=tp,
        num_speculative_tokens=spec_tokens,
        scale=scale,
    )


def test_step_time_shapes() -> None:
    m = dense_model()
    one = m.step_time(1, 1000, 0)
    eight = m.step_time(8, 8000, 0)
    assert 0.05 < one < 0.15  # ~12 tok/s for a 16 GB dense model at 273 GB/s
    assert one < eight < 2 * one  # a bigger batch costs a little more per step...
    assert 8 / eight > 4 / one  # ...and far less per token
    assert m.step_time(1, 1000, 2048) > one  # a prefill chunk slows the decodes sharing the step
    moe = TimingModel(62e9, 0.95, 256, 8, 7e9, 576.0, 6144, 45, 2, 0, 1.0)
    assert moe.step_time(2, 0, 0) < moe.step_time(8, 0, 0) < 4 * moe.step_time(2, 0, 0)
    assert moe.comm(1) > 0 and dense_model().comm(1) == 0
    assert dense_model(spec_tokens=3).expected_tokens_per_step() > 1.5
    assert dense_model(scale=0.5).step_time(1, 0, 0) == 0.5 * dense_model().step_time(1, 0, 0)


def _scheduler(
    model: TimingModel,
    max_seqs: int = 8,
    batched: int = 2048,
    cache: bool = True,
    start: bool = True,
) -> Scheduler:
    metrics = EngineMetrics("m", "0", 32768, {})
    sched = Scheduler(model, max_seqs, batched, 100000, 16, cache, metrics)
    if start:
        sched.start()
    return sched


def _done(req: Request) -> None:
    while req.events.get(timeout=30)[0] != "done":
        pass


# Times below are read from the engine's own clock (the sum of its modelled step times), not
# the wall clock: a loaded machine stretches the wall clock, never the model.


def _ttft(sched: Scheduler, prompt: list[int], out: int = 2) -> float:
    req = Request("r", prompt, [Piece(" x", "content")] * out, "stop")
    sched.submit(req)
    _done(req)
    assert req.first_token_clock is not None
    return req.first_token_clock - req.arrival_clock


def test_bigger_prefill_chunks_lower_ttft_and_prefix_cache_skips_prefill() -> None:
    prompt = list(range(8000))
    small = _scheduler(dense_model(scale=0.05), batched=256)
    big = _scheduler(dense_model(scale=0.05), batched=8192)
    try:
        assert _ttft(big, prompt) < 0.75 * _ttft(small, prompt)
        first = _ttft(big, list(range(100, 8100)))
        again = _ttft(big, list(range(100, 8100)))
        assert again < 0.5 * first
        assert big.metrics.prefix_hits > 7000
    finally:
        small.stop()
        big.stop()


def test_requests_beyond_max_num_seqs_wait() -> None:
    # Queued before the engine runs: its first step sees all five at once.
    sched = _scheduler(dense_model(scale=0.02), max_seqs=2, start=False)
    try:
        reqs = [
            Request(f"r{i}", [1, 2, 3], [Piece(" x", "content")] * 100, "stop") for i in range(5)
        ]
        for r in reqs:
            sched.submit(r)
        sched.start()
        for r in reqs:
            _done(r)
        assert sched.peak_running == 2 and sched.peak_waiting == 5
        assert sched.metrics.success["stop"] == 5
    finally:
        sched.stop()


def _throughput(max_num_seqs: int) -> float:
    """Output tokens per engine second for 8 requests of 64 tokens queued at once."""
    sched = _scheduler(dense_model(scale=0.02), max_seqs=max_num_seqs, start=False)
    try:
        reqs = [
            Request(f"r{i}", list(range(20)), [Piece(" x", "content")] * 64, "length")
            for i in range(8)
        ]
        for r in reqs:
            sched.submit(r)
        sched.start()
        for r in reqs:
            _done(r)
        assert [r.generated for r in reqs] == [64] * 8
        return 8 * 64 / sched.clock
    finally:
        sched.stop()


def test_total_throughput_rises_with_max_num_seqs() -> None:
    assert _throughput(8) > 2.0 * _throughput(2)


def _peak_running(max_num_seqs: int) -> float:
    """The most requests `/metrics` showed running while 8 concurrent ones were served."""
    port = free_port()
    argv = serve_argv(
        "Qwen/Qwen3-8B", port, "--max-num-seqs", str(max_num_seqs), "--max-model-len", "4096"
    )
    engine = Engine(argv, {"SPARK_SIM_TOKEN_SCALE": "0.08"})
    try:
        engine.wait_healthy(port)
        body = {
            "model": "Qwen/Qwen3-8B",
            "messages": [{"role": "user", "content": "Tell me about the Spark."}],
            "max_tokens": 512,
            "ignore_eos": True,
            "temperature": 0,
        }
        tokens: list[int] = []

        def one() -> None:
            r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=120)
            tokens.append(r.json()["usage"]["completion_tokens"])

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        peak = 0.0
        while any(t.is_alive() for t in threads):
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            for line in text.splitlines():
                if line.startswith("vllm:num_requests_running{"):
                    peak = max(peak, float(line.rsplit(" ", 1)[1]))
            time.sleep(0.05)
        for t in threads:
            t.join()
        assert tokens == [512] * 8
        return peak
    finally:
        engine.stop()


def test_the_api_server_runs_at_most_max_num_seqs_at_once() -> None:
    """Through the HTTP API, as the demo runs the stand-in: with --max-num-seqs 2 eight
    concurrent requests run two at a time (never more), with 8 more than two at once."""
    assert _peak_running(2) == 2
    assert 2 < _peak_running(8) <= 8

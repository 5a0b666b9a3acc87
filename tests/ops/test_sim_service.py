"""Smoke checks, benchmark and the smoke/bench CLI against the SIMULATED engine (glm-5.3-flash).

The service is the bundled recipe's two-rank plan, run as two engine subprocesses on
loopback. Benchmark figures are checked against timings taken independently with the
official `openai` client.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from ops_helpers import glm_plan
from ops_simengine import SimService, free_port, loopback_ranks

from spark_tui import cli
from spark_tui.core.workload import Workload
from spark_tui.ops.bench import (
    BenchConfig,
    BenchProgress,
    BenchResult,
    BenchRun,
    BenchUpdate,
    LevelResult,
    run_bench,
)
from spark_tui.ops.history import History
from spark_tui.ops.smoke import UNREACHABLE_CAUSE, all_passed, run_smoke, server_unreachable

GLM = "nvidia/GLM-5.3-Flash-FP4-Local"


def start(tmp: Path, overrides: dict[str, object] | None = None) -> SimService:
    ranks, port = loopback_ranks(glm_plan(overrides).to_dict())
    service = SimService(ranks, port, tmp)
    service.start()
    return service


@pytest.fixture(scope="module")
def glm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimService]:
    service = start(tmp_path_factory.mktemp("glm"))
    try:
        yield service
    finally:
        service.stop()


async def test_every_check_passes_for_glm(glm: SimService) -> None:
    results = await run_smoke(glm.base_url, expect_reasoning=True, tool_call_parser="glm47")
    by = {r.name: r for r in results}
    assert all_passed(results), {r.name: (r.detail, r.cause) for r in results}
    assert by["models"].data["model"] == GLM
    assert by["chat"].data["finish_reason"] == "stop"
    assert by["chat"].data["reasoning_chars"] > 0  # glm45 parser: reasoning kept apart
    assert by["tool_call"].data["function"] == "get_weather"
    assert "boston" in by["tool_call"].data["arguments"].lower()
    assert "[DONE]" in by["streaming"].detail
    assert all(r.latency_s > 0 for r in results)


async def test_removed_tool_parser_and_stopped_server(tmp_path: Path) -> None:
    overrides = {"tool_call_parser": "none", "enable_auto_tool_choice": "false"}
    service = start(tmp_path, overrides)
    try:
        assert not any("tool" in a for a in service.ranks[0])
        results = await run_smoke(service.base_url, GLM, tool_call_parser="glm47")
    finally:
        service.stop()
    by = {r.name: r for r in results}
    assert [r.name for r in results if not r.ok] == ["tool_call"]
    assert "--enable-auto-tool-choice" in by["tool_call"].cause
    assert "--tool-call-parser glm47" in by["tool_call"].remedy
    # The same address after the server stopped: every check fails as unreachable.
    stopped = await run_smoke(service.base_url, GLM, timeout=5)
    assert server_unreachable(stopped) and all(r.cause == UNREACHABLE_CAUSE for r in stopped)


def _openai_timings(base_url: str, prompt_tokens: int, output_tokens: int, n: int) -> dict:
    """TTFT, per-request decode speed and total tokens/s measured with the openai client."""
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused")
    words = prompt_tokens
    ttfts, speeds, prompt_counts, tokens = [], [], [], 0
    wall = 0.0
    for i in range(n + 1):
        # A fresh prefix per request: no prefix-cache hit from an earlier run.
        prompt = f"{uuid.uuid4().hex[:8]} " + " ".join(
            ["alpha", "beta", "gamma", "delta"][j % 4] for j in range(words)
        )
        sent = time.perf_counter()
        stream = client.chat.completions.create(
            model=GLM,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=output_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"min_tokens": output_tokens, "ignore_eos": True},
        )
        first = last = None
        usage = None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            if chunk.choices:
                delta = chunk.choices[0].delta
                text = (
                    delta.content
                    or getattr(delta, "reasoning", None)
                    or (delta.model_extra or {}).get("reasoning")
                )
                if text:
                    now = time.perf_counter()
                    first = first if first is not None else now
                    last = now
        assert usage is not None and first is not None and last is not None
        if i == 0:  # calibrate the prompt to the requested length; not measured
            words = max(1, round(words * prompt_tokens / usage.prompt_tokens))
            continue
        ttfts.append(first - sent)
        speeds.append((usage.completion_tokens - 1) / (last - first))
        prompt_counts.append(usage.prompt_tokens)
        tokens += usage.completion_tokens
        wall += last - sent
    return {
        "ttft_p50_s": statistics.median(ttfts),
        "tps_per_request_mean": statistics.fmean(speeds),
        "total_output_tps": tokens / wall,
        "prompt_tokens": statistics.fmean(prompt_counts),
        "ttft_s": ttfts,
        "tokens_per_s": speeds,
    }


async def test_bench_figures_agree_with_the_openai_client(glm: SimService) -> None:
    cfg = BenchConfig(
        concurrency=(1,),
        workload=Workload(prompt_tokens=512, output_tokens=40),
        requests_per_level=5,
    )
    independent = await asyncio.to_thread(_openai_timings, glm.base_url, 512, 40, 5)
    result = await run_bench(glm.base_url, GLM, cfg)
    level = result.level(1)
    assert level is not None and level.errors == 0 and result.forced_length
    assert level.output_tokens == 5 * 40
    assert abs(level.prompt_tokens_mean - independent["prompt_tokens"]) <= 0.05 * 512
    # The server's own /tokenize made each prompt exactly as long as asked for.
    assert level.prompt_tokens_mean == 512 and level.prompt_length_misses == 0
    # Each figure is the level's own per-request measurements, summed up as documented.
    ttfts, speeds = level.per_request["ttft_s"], level.per_request["tokens_per_s"]
    assert len(ttfts) == len(speeds) == 5
    assert level.figures["ttft_p50_s"] == pytest.approx(statistics.median(ttfts))
    assert level.figures["tps_per_request_mean"] == pytest.approx(statistics.fmean(speeds))
    assert level.figures["total_output_tps"] == pytest.approx(200 / level.duration_s)
    # Both clients measure the same quantities: each figure agrees with the openai client's
    # within 10 %, or within the spread the requests themselves showed on this machine (a
    # busy machine slows some requests of either run; a wrong definition, such as decode speed
    # over the whole latency or prompt tokens counted as output, lands outside both).
    pairs = {
        "ttft_p50_s": "ttft_s",
        "tps_per_request_mean": "tokens_per_s",
        "total_output_tps": "tokens_per_s",
    }
    for figure, sample in pairs.items():
        ours, theirs = level.figures[figure], independent[figure]
        pooled = level.per_request[sample] + independent[sample]
        spread = (max(pooled) - min(pooled)) / statistics.median(pooled)
        assert ours is not None
        assert abs(ours - theirs) <= max(0.10, spread) * theirs, (figure, ours, theirs, spread)


async def test_bench_samples_metrics_at_most_once_a_second_by_default(glm: SimService) -> None:
    """Each /metrics sample costs the server a render of its page on the process that streams
    the timed tokens: by default a level samples half a second in and then once a second."""
    cfg = BenchConfig(
        concurrency=(2,),
        workload=Workload(prompt_tokens=64, output_tokens=160),
        requests_per_level=4,
    )
    result = await run_bench(glm.base_url, GLM, cfg)
    level = result.level(2)
    assert level is not None and level.errors == 0
    # (The simulated engine paces its tokens: the level lasts long enough for a faster
    # sampling to show; a slower machine only makes it longer, with no more samples a second.)
    assert level.duration_s > 1.0
    assert 1 <= level.metrics_samples <= 1 + level.duration_s / 1.0


async def test_bench_keeps_one_connection_per_concurrent_request(glm: SimService) -> None:
    """Each reply is read to its end, so its connection serves the next request (through the
    SSH forward, one channel each), as vLLM's own benchmark client does."""
    before = glm.log(0)
    cfg = BenchConfig(
        concurrency=(2,), workload=Workload(prompt_tokens=32, output_tokens=8), requests_per_level=8
    )
    result = await run_bench(glm.base_url, GLM, cfg)
    level = result.level(2)
    assert level is not None and level.errors == 0
    served = [
        line.split(" - ", 1)[0].rsplit(":", 1)[1]
        for line in glm.log(0)[len(before) :].splitlines()
        if '"POST /v1/chat/completions HTTP/1.1" 200' in line
    ]
    assert len(served) == 8 + result.warmup_requests
    # (One more than the concurrency: the /metrics sampler may hold one as a level starts.)
    assert len(set(served)) <= 2 + 1, sorted(set(served))


async def test_bench_samples_metrics_and_cancels_cleanly(glm: SimService) -> None:
    cfg = BenchConfig(
        concurrency=(4,),
        workload=Workload(prompt_tokens=64, output_tokens=24),
        requests_per_level=8,
        metrics_interval_s=0.02,
    )
    seen: list[BenchUpdate] = []
    result = await run_bench(glm.base_url, GLM, cfg, emit=seen.append)
    level = result.level(4)
    assert level is not None and level.errors == 0
    # One progress per request, then the level as it finished.
    assert [type(e) for e in seen] == [BenchProgress] * 8 + [LevelResult]
    assert seen[-1] == level
    assert result.metrics_available and level.metrics_samples > 0
    assert level.metrics["num_requests_running"]["max"] >= 2
    assert 0 < level.metrics["kv_cache_usage_perc"]["max"] <= 1
    assert level.figures["itl_p95_s"] >= level.figures["itl_p50_s"] > 0
    # Cancelling mid-level stops promptly and keeps the partial result marked as cancelled.
    long = BenchConfig(
        concurrency=(4,),
        workload=Workload(prompt_tokens=64, output_tokens=4000),
        requests_per_level=4,
    )
    bench = BenchRun(glm.base_url, GLM, long)
    task = asyncio.create_task(bench.run())
    await asyncio.sleep(0.5)
    t0 = time.perf_counter()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.perf_counter() - t0 < 1.0
    assert bench.result.cancelled and bench.result.levels == []


def test_cli_smoke_and_bench(
    glm: SimService, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli.main(["smoke", "--base-url", glm.base_url + "/v1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and [c["name"] for c in out["checks"]] == [
        "health",
        "models",
        "chat",
        "tool_call",
        "streaming",
    ]
    code = cli.main(
        [
            "bench",
            "--base-url",
            glm.base_url,
            "--concurrency",
            "1,2",
            "--prompt-tokens",
            "32",
            "--output-tokens",
            "8",
            "--repeats",
            "2",
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    bench = json.loads(captured.out)
    assert [lv["concurrency"] for lv in bench["levels"]] == [1, 2]
    assert [lv["requests"] for lv in bench["levels"]] == [4, 8]  # 2 x concurrency, twice
    assert all(len(lv["repeats"]) == 2 for lv in bench["levels"])
    assert "level 2/2 (concurrency 2, repeat 2)" in captured.err  # progress on stderr
    kinds = [r.kind for r in History().list_runs()]
    assert kinds == ["smoke", "bench"]
    assert cli.main(["bench", "--base-url", glm.base_url, "--concurrency", "0"]) == 2
    # A server that is not there: smoke exits 1 (3 is for a cluster named by inventory).
    assert cli.main(["smoke", "--base-url", f"http://127.0.0.1:{free_port()}"]) == 1
    assert "server not reachable" in capsys.readouterr().out


def _counter(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") and not line.startswith("#")
    )


async def _engine_counts(base_url: str) -> tuple[float, float]:
    """Prompt tokens the engine counted, and those its prefix cache served."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(base_url + "/metrics")).text
    return _counter(text, "vllm:prompt_tokens_total"), _counter(
        text, "vllm:prefix_cache_hits_total"
    )


async def test_a_workload_file_with_a_shared_prefix_reaches_the_engine_as_asked(
    glm: SimService, tmp_path: Path
) -> None:
    path = tmp_path / "load.jsonl"
    lines = [
        {"prompt_tokens": 1200, "output_tokens": 6},
        {"prompt_tokens": 700, "output_tokens": 10},
        {"prompt": "Explain prefix caching in two sentences.", "output_tokens": 8},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))

    async def measure(share: float) -> tuple[BenchResult, float, float]:
        workload = Workload(shared_prefix=share, context_depths=(0, 64), seed=3).with_file(path)
        cfg = BenchConfig(concurrency=(2,), workload=workload, requests_per_level=6)
        prompts0, hits0 = await _engine_counts(glm.base_url)
        result = await run_bench(glm.base_url, GLM, cfg)
        prompts1, hits1 = await _engine_counts(glm.base_url)
        return result, prompts1 - prompts0, hits1 - hits0

    result, engine_prompts, hits = await measure(0.5)
    assert result.forced_length and not result.notes, result.notes
    assert [(lv.context_depth, lv.concurrency) for lv in result.levels] == [(0, 2), (64, 2)]
    shallow, deep = result.levels
    for level in result.levels:
        # The engine counted each prompt as asked for, and wrote each reply's length.
        assert level.errors == 0 and level.prompt_length_misses == 0
        assert level.output_length_misses == 0 and level.output_tokens == 2 * (6 + 10 + 8)
        assert level.prompt_tokens_mean == level.prompt_tokens_requested_mean
    # The file's two counted lines (1200, 700) and the real prompt's own count, twice each; the
    # same prompts 64 tokens deeper (a request's number has more digits there: +-1).
    assert deep.prompt_tokens_mean == pytest.approx(shallow.prompt_tokens_mean + 64, abs=1)
    assert shallow.prompt_tokens_mean > (1200 + 700) / 3
    measured = sum(lv.prompt_tokens_mean * lv.requests for lv in result.levels)
    assert engine_prompts == pytest.approx(measured + result.warmup_prompt_tokens)
    # Half of every prompt in common: the engine's prefix cache (blocks of 256 tokens in
    # this recipe) serves the shared blocks, which the same prompts without a shared prefix
    # do not get.
    _, _, unshared_hits = await measure(0.0)
    assert hits >= unshared_hits + 4 * 256, (hits, unshared_hits)

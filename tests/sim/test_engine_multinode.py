"""Two simulated ranks of the glm-5.3-flash recipe, rendered by the foundation's render_argv,
meet over TCP, reach ready, and fail as a real cluster does when one node dies."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from engine_harness import Engine, free_port, recipe_argv, serve_argv


class Pair:
    """A head and a headless worker of one TP=2 service."""

    def __init__(
        self, env_head: dict[str, str] | None = None, env_worker: dict[str, str] | None = None
    ) -> None:
        self.api_port = free_port()
        self.master_port = free_port()
        argv, env = recipe_argv("glm-5.3-flash", host="127.0.0.1", port=self.api_port)
        rdv = [
            "--nnodes",
            "2",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(self.master_port),
        ]
        self.head = Engine(argv + rdv + ["--node-rank", "0"], {**env, **(env_head or {})})
        self.worker = Engine(
            argv + rdv + ["--node-rank", "1", "--headless"], {**env, **(env_worker or {})}
        )

    def stop(self) -> None:
        self.head.stop()
        self.worker.stop()


@pytest.fixture
def pair() -> Iterator[Pair]:
    p = Pair()
    try:
        yield p
    finally:
        p.stop()


def test_two_ranks_reach_ready_and_a_dead_worker_fails_the_next_request(pair: Pair) -> None:
    pair.head.wait_healthy(pair.api_port)
    models = httpx.get(f"http://127.0.0.1:{pair.api_port}/v1/models").json()
    assert models["data"][0]["max_model_len"] == 500000
    head_log, worker_log = pair.head.output, pair.worker.output
    # both ranks joined the same rendezvous and split the model
    assert f"distributed_init_method=tcp://127.0.0.1:{pair.master_port} backend=nccl" in head_log
    assert "world_size=2 rank=1 local_rank=0" in worker_log
    assert "headless multiproc executor, with head node address" in worker_log
    assert "(Worker_TP1 pid=" in worker_log and "(Worker_TP0 pid=" in head_log
    assert "Model loading took 58.1 GiB memory" in worker_log
    assert "Loading safetensors checkpoint shards: 100% Completed | 24/24" in worker_log
    assert "Maximum concurrency for 500,000 tokens per request: 2.8" in head_log
    assert "APIServer" not in worker_log and "Starting vLLM server on" not in worker_log

    # As real vLLM 0.32: the head's /health stays 200 after its worker died (past the
    # heartbeat timeout), the next request fails with 500, then the head exits.
    pair.worker.proc.send_signal(signal.SIGKILL)
    base = f"http://127.0.0.1:{pair.api_port}"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert httpx.get(base + "/health", timeout=5).status_code == 200
        time.sleep(0.5)
    assert pair.head.proc.poll() is None, "the head is still up"
    chat = {"model": models["data"][0]["id"], "messages": [{"role": "user", "content": "hi"}]}
    resp = httpx.post(base + "/v1/chat/completions", json=chat, timeout=30)
    assert resp.status_code == 500
    assert resp.json()["error"] == {
        "message": "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        "type": "InternalServerError",
        "param": None,
        "code": 500,
    }
    rc = pair.head.wait_exit(15)
    assert rc != 0
    out = pair.head.output
    assert "NCCL error: remote process exited or there was a network error" in out
    assert "EngineDeadError" in out
    assert "died unexpectedly" in out


def test_head_death_fails_the_worker_and_graceful_stop_does_not(pair: Pair) -> None:
    pair.head.wait_healthy(pair.api_port)
    pair.head.proc.send_signal(signal.SIGKILL)
    assert pair.worker.wait_exit(15) == 1
    assert "NCCL error: remote process exited" in pair.worker.output

    graceful = Pair()
    try:
        graceful.head.wait_healthy(graceful.api_port)
        graceful.head.proc.send_signal(signal.SIGTERM)
        assert graceful.head.wait_exit(10) == 0
        assert graceful.worker.wait_exit(10) == 0
        assert "Finished server process" in graceful.head.output
    finally:
        graceful.stop()


def test_worker_dies_after_ready_scenario() -> None:
    p = Pair(env_worker={"SPARK_SIM_DIE_AFTER_READY_S": "0.3"})
    try:
        p.head.wait_healthy(p.api_port)
        assert p.worker.wait_exit(10) == 137
        assert "simulated node failure" in p.worker.output
        resp = httpx.post(
            f"http://127.0.0.1:{p.api_port}/v1/completions",
            json={"prompt": "x", "max_tokens": 2},
            timeout=30,
        )
        assert resp.status_code == 500
        assert p.head.wait_exit(10) == 1
        assert "ncclRemoteError" in p.head.output
    finally:
        p.stop()


def _dp_argv(rpc: int) -> list[str]:
    return [
        "--data-parallel-size",
        "2",
        "--data-parallel-size-local",
        "1",
        "--data-parallel-address",
        "127.0.0.1",
        "--data-parallel-rpc-port",
        str(rpc),
        "--max-model-len",
        "4096",
    ]


def test_data_parallel_replicas_meet_behind_one_api_and_fail_together() -> None:
    # The form real vLLM 0.32 runs for a dense model: one API on the head, the other
    # replica headless with its start rank.
    rpc = free_port()
    ports = [free_port(), free_port()]
    fast_stats = {"SPARK_SIM_STATS_INTERVAL_S": "0.2"}
    head = Engine(
        serve_argv("Qwen/Qwen3-8B", ports[0], *_dp_argv(rpc), "--api-server-count", "1"),
        fast_stats,
    )
    other = Engine(
        serve_argv(
            "Qwen/Qwen3-8B",
            ports[1],
            *_dp_argv(rpc),
            "--headless",
            "--data-parallel-start-rank",
            "1",
        )
    )
    try:
        head.wait_healthy(ports[0])
        # vLLM 0.32's words on the lab's DP 2 (tests/lab/test_lab_vllm_dp.py).
        assert "[utils.py:1245] Started DP Coordinator process (PID: " in head.output
        assert (
            "[coordinator.py:258] All engine subscriptions received by DP coordinator"
            in head.output
        )
        assert (
            f"Launching 1 data parallel engine(s) in headless mode, with head node address "
            f"tcp://127.0.0.1:{rpc}." in other.output
        )
        assert "(EngineCore_DP1 pid=" in other.output
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{ports[1]}/health", timeout=2)  # no API there
        # Both replicas serve: the head's API gives each engine its share, and its
        # per-engine counters and stats lines say so (engine="0" and engine="1").
        body = {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}]}
        with ThreadPoolExecutor(8) as pool:
            got = list(
                pool.map(
                    lambda _: (
                        httpx.post(
                            f"http://127.0.0.1:{ports[0]}/v1/chat/completions",
                            json={**body, "max_tokens": 8},
                            timeout=60,
                        ).status_code
                    ),
                    range(8),
                )
            )
        assert got == [200] * 8
        text = httpx.get(f"http://127.0.0.1:{ports[0]}/metrics", timeout=10).text
        served = {
            m.group(1): float(m.group(2))
            for m in re.finditer(
                r'^vllm:request_success_total\{engine="(\d)",finished_reason="length"[^}]*\} (\S+)$',
                text,
                re.M,
            )
        }
        assert served["0"] > 0 and served["1"] > 0 and served["0"] + served["1"] == 8, served
        assert text.count("# TYPE vllm:request_success_total counter") == 1  # one family
        deadline = time.monotonic() + 10
        while (
            "Engine 001: Avg prompt throughput" not in head.output and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert "Engine 000: Avg prompt throughput" in head.output
        assert "Engine 001: Avg prompt throughput" in head.output
        assert "disabling stats logging" not in head.output
        other.proc.send_signal(signal.SIGKILL)
        assert head.wait_exit(15) == 1
        assert "EngineDeadError" in head.output
    finally:
        for engine in (head, other):
            engine.stop()


def test_a_dp_head_with_an_api_process_per_replica_logs_no_stats_as_vllm() -> None:
    # vLLM's default under internal load balancing: one API process per replica, and then
    # its periodic stats lines are off (vllm/v1/metrics/loggers.py).
    rpc = free_port()
    port = free_port()
    head = Engine(serve_argv("Qwen/Qwen3-8B", port, *_dp_argv(rpc)))
    other = Engine(
        serve_argv(
            "Qwen/Qwen3-8B",
            free_port(),
            *_dp_argv(rpc),
            "--headless",
            "--data-parallel-start-rank",
            "1",
        )
    )
    try:
        head.wait_healthy(port)
        deadline = time.monotonic() + 10
        while "disabling stats logging" not in head.output and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (
            "AsyncLLM created with api_server_count more than 1; disabling stats logging to "
            "avoid incomplete stats." in head.output
        )
    finally:
        for engine in (head, other):
            engine.stop()


def test_external_load_balancing_without_a_rank_is_refused_for_a_moe_model_too() -> None:
    # What vLLM 0.32 says to a MoE model's --data-parallel-external-lb with no rank.
    engine = Engine(serve_argv("openai/gpt-oss-120b", free_port(), *_dp_argv(free_port()), "-dpe"))
    try:
        assert engine.wait_exit(30) == 1
        assert (
            "ValueError: Invalid data-parallel launch options: `--data-parallel-external-lb` "
            "requires a data-parallel rank." in engine.output
        )
        assert "Non-MoE" not in engine.output
    finally:
        engine.stop()


@pytest.mark.parametrize("how", [["--data-parallel-rank"], ["--data-parallel-external-lb", "-dpn"]])
def test_the_per_replica_api_form_is_refused_for_a_dense_model_as_vllm_does(
    how: list[str],
) -> None:
    # vLLM 0.32 refuses external load balancing for a non-MoE model on every rank, at startup.
    rpc = free_port()
    ranks = [
        Engine(serve_argv("Qwen/Qwen3-8B", free_port(), *_dp_argv(rpc), *how, str(r)))
        for r in (0, 1)
    ]
    try:
        for engine in ranks:
            assert engine.wait_exit(30) == 1
            assert (
                "ValueError: Non-MoE models do not support external data parallel mode. For "
                "external load balancing, launch independent vLLM instances without "
                "--data-parallel-* arguments." in engine.output
            )
            assert "Traceback (most recent call last):" in engine.output
    finally:
        for engine in ranks:
            engine.stop()


def test_the_per_replica_api_form_runs_for_a_moe_model_as_vllms_source_allows() -> None:
    # vLLM 0.32 takes --data-parallel-rank on every node for a MoE model (on GPUs; its CPU
    # build stops such replicas at the first request, which check refuses): each replica's
    # own API answers.
    rpc = free_port()
    ports = [free_port(), free_port()]
    ranks = [
        Engine(
            serve_argv(
                "openai/gpt-oss-120b", ports[r], *_dp_argv(rpc), "--data-parallel-rank", str(r)
            )
        )
        for r in (0, 1)
    ]
    try:
        body = {"model": "openai/gpt-oss-120b", "messages": [{"role": "user", "content": "hi"}]}
        for engine, port in zip(ranks, ports, strict=True):
            engine.wait_healthy(port)
            resp = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={**body, "max_tokens": 4},
                timeout=60,
            )
            assert resp.status_code == 200, resp.text
        for r, engine in enumerate(ranks):
            assert f"(EngineCore_DP{r} pid=" in engine.output
            assert "Non-MoE" not in engine.output and "Traceback" not in engine.output
    finally:
        for engine in ranks:
            engine.stop()


def test_a_head_whose_worker_never_comes_waits_and_ignores_sigterm() -> None:
    # As real vLLM 0.32: stuck in the process group's init, SIGTERM and SIGINT do nothing
    # and there is no timeout of its own; only SIGKILL ends it.
    api, master = free_port(), free_port()
    argv, env = recipe_argv("glm-5.3-flash", host="127.0.0.1", port=api)
    rdv = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(master)]
    head = Engine(argv + rdv + ["--node-rank", "0"], env)
    try:
        deadline = time.monotonic() + 20
        while "distributed_init_method=" not in head.output and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "distributed_init_method=" in head.output, head.output
        for sig in (signal.SIGTERM, signal.SIGINT):
            head.proc.send_signal(sig)
        time.sleep(7)  # longer than the default rendezvous timeout at test pace
        assert head.proc.poll() is None, "the head must still be waiting"
        try:
            health = httpx.get(f"http://127.0.0.1:{api}/health", timeout=2).status_code
        except httpx.HTTPError:
            health = None
        assert health != 200
        head.proc.send_signal(signal.SIGKILL)
        assert head.wait_exit(10) == -signal.SIGKILL
    finally:
        head.stop()

"""A running cluster is loading until its API answers /health: each rank's progress then comes
from its log's latest progress bar (real vLLM lines), the cluster's from its slowest rank."""

from __future__ import annotations

import socket
from typing import Any

from spark_tui.ops.cluster import ClusterStatus, RankStatus
from spark_tui.ops.readiness import RankProgress, readiness
from spark_tui.remote.docker_remote import LogRecord

# Real vLLM 0.32 lines (tests/fixtures' logs): weights loading, then the KV cache's profile.
HEAD_LOG = [
    "(EngineCore pid=3931) INFO 12-01 10:00:00 [gpu_model_runner.py:5039] Starting to load model",
    "(EngineCore pid=3931) Loading safetensors checkpoint shards:   0% Completed | 0/4 "
    "[00:00<?, ?it/s]",
    "(EngineCore pid=3931) Loading safetensors checkpoint shards:  75% Completed | 3/4 "
    "[00:09<00:03, 3.10s/it]",
]
WORKER_LOG = [
    "(Worker pid=77) Loading safetensors checkpoint shards:  25% Completed | 1/4 "
    "[00:03<00:09, 3.10s/it]",
]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Conn:
    """TEST DOUBLE: a node's SSH connection whose forward reaches a port nothing listens on
    (the head's API is not up yet)."""

    async def forward_local_port(self, dest_host: str, dest_port: int) -> int:
        return _closed_port()


class Docker:
    """TEST DOUBLE: a node's Docker whose containers' logs are given."""

    def __init__(self, logs: dict[str, list[str]]) -> None:
        self._logs = logs

    async def logs(self, name: str, *, tail: int | str = "all") -> list[LogRecord]:
        return [LogRecord("", i, text) for i, text in enumerate(self._logs[name])]


def _cluster() -> ClusterStatus:
    ranks = [
        RankStatus(0, "spark-a", "c-r0", "running", "Up 1 minute", "head", command=["vllm"]),
        RankStatus(1, "spark-b", "c-r1", "running", "Up 1 minute", "worker", command=["vllm"]),
    ]
    return ClusterStatus("c", "glm-5.3-flash", None, None, ranks)


async def test_a_cluster_whose_api_does_not_answer_is_loading_with_each_ranks_progress() -> None:
    pool: Any = {"spark-a": Conn(), "spark-b": Conn()}
    dockers: Any = {"spark-a": Docker({"c-r0": HEAD_LOG}), "spark-b": Docker({"c-r1": WORKER_LOG})}
    found = await readiness(pool, dockers, _cluster(), timeout=2.0)
    assert found.state == "loading"
    assert found.ranks == (
        RankProgress(0, "spark-a", 0.75, "Loading safetensors checkpoint shards 3/4"),
        RankProgress(1, "spark-b", 0.25, "Loading safetensors checkpoint shards 1/4"),
    )
    assert found.progress == 0.25
    assert found.to_dict()["progress"] == 0.25 and found.to_dict()["state"] == "loading"


async def test_a_rank_whose_log_shows_no_bar_yet_has_no_progress() -> None:
    pool: Any = {"spark-a": Conn(), "spark-b": Conn()}
    dockers: Any = {"spark-a": Docker({"c-r0": []}), "spark-b": Docker({"c-r1": []})}
    found = await readiness(pool, dockers, _cluster(), timeout=2.0)
    assert found.state == "loading" and found.progress is None
    assert [r.progress for r in found.ranks] == [None, None]

"""Forming the Ray cluster of a vllm-ray launch: `ray status` in the head, polled until every
node has joined (each change an event), or a clear failure naming who did not join."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import Recipe
from spark_tui.ops.events import ClusterEvent, RayClusterState
from spark_tui.ops.launch import LaunchFailed, WatchedRank
from spark_tui.ops.ray import status_argv, wait_formed, worker_ray_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ONE = (FIXTURES / "ray_status_head_only_2600.txt").read_text()
TWO = (FIXTURES / "ray_status_two_nodes_2600.txt").read_text()


class FakeContainer:
    def __init__(self, answers: list[str], seen: list[list[str]]) -> None:
        self.answers, self.seen = answers, seen

    def exec_run(self, argv: list[str], detach: bool = False) -> Any:
        self.seen.append(list(argv))
        out = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

        class Result:
            exit_code = 0
            output = out.encode()

        return Result()


class FakeDocker:
    """What ops.ray asks of RemoteDocker: `call(fn)` with a client whose container execs."""

    def __init__(self, answers: list[str]) -> None:
        self.seen: list[list[str]] = []
        self.container = FakeContainer(answers, self.seen)

    async def call(self, fn: Any, what: str) -> Any:
        docker = self

        class Containers:
            def get(self, name: str) -> FakeContainer:
                return docker.container

        class Client:
            containers = Containers()

        return fn(Client())


def _plan() -> Any:
    from spark_tui.core.facts import Interface, NodeFacts

    def node(name: str, ip: str) -> NodeFacts:
        iface = Interface(netdev="enp1s0f1np1", rdma_device="rocep1s0f1", state="up", ipv4=ip)
        return NodeFacts(name=name, address=ip, interfaces=[iface])

    recipe = Recipe(
        name="ray-test",
        model="org/model",
        command="vllm serve {model} --port {port} -tp {tensor_parallel}",
        runtime="vllm-ray",
        container="example/vllm:1",
        defaults={"port": 8000, "tensor_parallel": 2},
    )
    nodes = [node("spark-a", "169.254.1.1"), node("spark-b", "169.254.1.2")]
    return build_plan(recipe, apply_overrides(recipe, []), nodes)


def _rank(docker: FakeDocker, rank: int = 0, node: str = "spark-a") -> WatchedRank:
    return WatchedRank(rank, node, f"c{rank}", rank == 0, conn=None, docker=docker)  # type: ignore[arg-type]


async def test_the_head_is_polled_until_both_nodes_joined_and_each_change_is_an_event() -> None:
    plan = _plan()
    docker = FakeDocker([ONE, ONE, TWO])
    events: list[ClusterEvent] = []
    status = await wait_formed(plan, _rank(docker), events.append, timeout=30, poll=0)
    assert status.active == 2 and status.resources["CPU"] == 4.0
    states = [e for e in events if isinstance(e, RayClusterState)]
    assert [(s.nodes_joined, s.formed) for s in states] == [(1, False), (2, True)]
    assert states[-1].nodes_expected == 2 and states[-1].cluster_id == plan.cluster_id
    assert (
        docker.seen[0] == status_argv(plan) == ["ray", "status", "--address", "169.254.1.1:46379"]
    )


async def test_a_cluster_that_never_forms_fails_with_the_count_and_a_remedy() -> None:
    plan = _plan()
    with pytest.raises(LaunchFailed) as failed:
        await wait_formed(plan, _rank(FakeDocker([ONE])), lambda _e: None, timeout=0, poll=0)
    assert "1 of 2 node(s) joined 169.254.1.1:46379" in failed.value.message
    assert "Ray port" in failed.value.remedy and failed.value.rank == 0


def test_a_worker_that_cannot_reach_the_gcs_is_quoted_with_its_node() -> None:
    worker = _rank(FakeDocker([ONE]), rank=1, node="spark-b")
    text = (FIXTURES / "ray_start_worker_gcs_unreachable_2600.txt").read_text().splitlines()
    worker.lines.extend(text)
    said = worker_ray_lines([worker])
    assert said and all(s.startswith("spark-b: ") for s in said)
    assert any("Failed to connect to GCS" in s for s in said) and len(said) <= 3

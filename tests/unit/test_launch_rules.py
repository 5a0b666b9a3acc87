"""Remedies for a failed rank that name what to check."""

from __future__ import annotations

from spark_tui.core.facts import GIB, Interface, NodeFacts
from spark_tui.core.launch_rules import rank_failure_remedy, rendezvous_timeout
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import Recipe

TIMEOUT_LINE = (
    "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms "
    "while trying to connect to (192.168.50.1, 29501)."
)


def _node(i: int) -> NodeFacts:
    return NodeFacts(
        name=f"spark-{i}",
        address=f"10.0.0.{i + 1}",
        memory_total_bytes=128 * GIB,
        interfaces=[Interface("enp1s0f0np0", "rocep1s0f0", "up", f"192.168.50.{i + 1}", 200000)],
    )


def test_rendezvous_timeout_remedy_names_port_addresses_and_firewall() -> None:
    recipe = Recipe(
        name="r", model="org/m", container="img:1",
        command="vllm serve {model} --tensor-parallel-size 2",
    )  # fmt: skip
    plan = build_plan(recipe, {}, [_node(0), _node(1)])
    assert rendezvous_timeout([TIMEOUT_LINE])
    remedy = rank_failure_remedy(["INFO loading", TIMEOUT_LINE], plan.ranks)
    assert remedy is not None
    assert "192.168.50.1:29501" in remedy and "spark-1 (192.168.50.2)" in remedy
    assert "firewall" in remedy and "29501/tcp" in remedy
    assert rank_failure_remedy(["CUDA out of memory"], plan.ranks) is None

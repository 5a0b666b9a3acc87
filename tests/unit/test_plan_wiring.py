"""The launch plan on Sparks cabled as a ring: each rank's interfaces toward its
neighbours, the rendezvous the cabling allows, and layouts the cabling cannot carry
refused with the order or layout that fits (nodes probed from GB10 output formats)."""

from __future__ import annotations

import dataclasses

import pytest
from test_wiring import ring3, ring4  # type: ignore[import-not-found]

from spark_tui.core.errors import InputError
from spark_tui.core.facts import NodeFacts
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import Recipe


def _recipe(tp: int, pp: int = 1, dp: int = 1) -> Recipe:
    return Recipe(
        name="t",
        model="org/model",
        command=(
            "vllm serve {model} --port {port} --tensor-parallel-size {tensor_parallel} "
            "--pipeline-parallel-size {pipeline_parallel} --data-parallel-size {data_parallel}"
        ),
        container="example/vllm:1",
        defaults={
            "port": 8000,
            "tensor_parallel": tp,
            "pipeline_parallel": pp,
            "data_parallel": dp,
        },
    )


def _lan(nodes: list[NodeFacts]) -> list[NodeFacts]:
    return [dataclasses.replace(n, address=f"192.168.1.{i}") for i, n in enumerate(nodes, 10)]


def _plan(nodes: list[NodeFacts], tp: int, pp: int = 1, dp: int = 1, **sets: str):  # type: ignore[no-untyped-def]
    recipe = _recipe(tp, pp, dp)
    overrides = [f"{k}={v}" for k, v in sets.items()]
    return build_plan(recipe, apply_overrides(recipe, overrides), nodes)


def test_two_nodes_of_a_ring_rendezvous_over_the_cable_between_them() -> None:
    plan = _plan(ring3()[:2], tp=2)
    head, worker = plan.ranks
    assert plan.rendezvous["master_addr"] == "192.168.101.1"
    assert worker.container.env["HEAD_IP"] == "192.168.101.1"
    assert (head.cluster_address, worker.cluster_address) == ("192.168.101.1", "192.168.101.2")
    # b's first addressed port (f0) is cabled to c: its cable to a is f1.
    assert worker.container.env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert worker.container.env["NCCL_IB_HCA"] == "rocep1s0f1"
    assert head.container.env["GLOO_SOCKET_IFNAME"] == "enp1s0f0np0"
    assert head.container.env["NCCL_IB_HCA"] == "rocep1s0f0"


def test_three_node_ring_needs_the_lan_for_its_rendezvous() -> None:
    with pytest.raises(InputError) as err:
        _plan(_lan(ring3()), tp=3)
    assert "no cluster address reaches every node" in err.value.message
    assert "bootstrap_interface=enP7s7" in err.value.remedy


def test_three_node_ring_data_on_both_cables_bootstrap_on_the_lan() -> None:
    plan = _plan(_lan(ring3()), tp=3, bootstrap_interface="enP7s7")
    env = plan.ranks[1].container.env
    assert plan.rendezvous["master_addr"] == "192.168.1.10"
    assert env["VLLM_HOST_IP"] == "192.168.1.11"
    # b's cable toward the head (f1) first, then the one toward c.
    assert env["NCCL_IB_HCA"] == "rocep1s0f1,rocep1s0f0"
    assert env["UCX_NET_DEVICES"] == "enp1s0f1np1,enp1s0f0np0"
    assert (env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"]) == ("enP7s7", "enP7s7")
    assert env["NCCL_IB_MERGE_NICS"] == "1"
    assert "NCCL_ALGO" not in env  # three nodes of a ring are all cabled to each other


def test_merge_nics_is_a_setting() -> None:
    plan = _plan(_lan(ring3()), tp=3, bootstrap_interface="enP7s7", ring_merge_nics="false")
    assert plan.ranks[0].container.env["NCCL_IB_MERGE_NICS"] == "0"


def test_tp4_on_a_four_node_ring_runs_rings_only() -> None:
    plan = _plan(_lan(ring4()), tp=4, bootstrap_interface="enP7s7")
    assert all(r.container.env["NCCL_ALGO"] == "Ring" for r in plan.ranks)


def test_pipeline_across_the_ring_diagonal_is_refused_with_the_order_that_fits() -> None:
    # a-b-c-d-a: TP groups (a, b) and (c, d); stage pairs a-c and b-d have no cable.
    with pytest.raises(InputError) as err:
        _plan(_lan(ring4()), tp=2, pp=2, bootstrap_interface="enP7s7")
    assert "needs a link between a and c (pipeline stages)" in err.value.message
    assert "ring of 4" in err.value.message
    assert "list the nodes as a, b, d, c (head first)" in err.value.remedy
    assert "--set tensor_parallel=4 --set pipeline_parallel=1" in err.value.remedy
    nodes = _lan(ring4())
    plan = _plan([nodes[0], nodes[1], nodes[3], nodes[2]], tp=2, pp=2, bootstrap_interface="enP7s7")
    assert [r.node for r in plan.ranks] == ["a", "b", "d", "c"]


def test_tensor_parallel_group_with_no_cable_is_refused() -> None:
    # a-c is the diagonal: TP 2 of a and c has no link at all.
    nodes = _lan(ring4())
    with pytest.raises(InputError) as err:
        _plan([nodes[0], nodes[2], nodes[1], nodes[3]], tp=2, dp=2, bootstrap_interface="enP7s7")
    assert "needs a link between a and c (tensor-parallel group)" in err.value.message
    assert "list the nodes as a, b, c, d" in err.value.remedy


def test_data_parallel_replicas_need_no_cable_between_them() -> None:
    plan = _plan(_lan(ring4()), tp=2, dp=2, bootstrap_interface="enP7s7")
    assert len(plan.ranks) == 4

"""Simulated Sparks cabled as a ring: probed over real SSH (the simulated sshd), the
cabling is recognised and the plan puts each rank's data on its cables."""

from __future__ import annotations

from spark_tui.core import wiring as w
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import Recipe
from spark_tui.remote.probe import probe_nodes
from spark_tui.sim.nodes import SimCluster


async def test_three_simulated_sparks_on_a_ring_are_probed_as_a_ring(sim_scenario) -> None:
    async with SimCluster(sim_scenario(3, ring=True)) as sim:
        facts = await probe_nodes(sim.inventory, ssh_config=None, docker=False)
    wiring = w.wiring_of(facts)
    assert wiring.kind == w.RING, wiring.describe()
    assert sorted(link.subnet for link in wiring.links) == [
        "10.77.1.0/24",
        "10.77.2.0/24",
        "10.77.3.0/24",
    ]
    assert all(link.answered and link.speed_mbps == 200000 for link in wiring.links)
    head, second, _ = facts
    link = wiring.link_between(head.name, second.name)
    assert link is not None
    assert [(p.node, p.netdevs) for p in link.ports] == [
        (head.name, ("enp1s0f0np0",)),
        (second.name, ("enp1s0f1np1",)),
    ]
    recipe = Recipe(
        name="t",
        model="org/model",
        command="vllm serve {model} --tensor-parallel-size {tensor_parallel}",
        container="example/vllm:1",
        defaults={"tensor_parallel": 3},
    )
    settings = apply_overrides(recipe, ["bootstrap_interface=enP7s7"])
    plan = build_plan(recipe, settings, facts)
    assert plan.rendezvous["master_addr"] == sim.nodes[0].address
    env = plan.ranks[2].container.env
    assert env["UCX_NET_DEVICES"] == "enp1s0f0np0,enp1s0f1np1"
    assert env["GLOO_SOCKET_IFNAME"] == "enP7s7"

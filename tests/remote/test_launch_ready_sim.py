"""Ready means a first token: a head whose /health says 200 while its engine cannot answer
(the simulated engine's SPARK_SIM_ENGINE_DEAD_HEALTH_OK, as real vLLM after its engine core
died) is not ready; a healthy one is ready only after a 1-token request streamed a token."""

from __future__ import annotations

import pytest
from test_launch_sim import ENV, make_plan, pool_for

from spark_tui.ops.events import ClusterEvent, ClusterReady
from spark_tui.ops.launch import LaunchFailed, launch
from spark_tui.service.event_stream import streamed
from spark_tui.sim.nodes import SimCluster


async def test_healthy_head_that_cannot_answer_is_not_ready(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        plan.ranks[0].container.env["SPARK_SIM_ENGINE_DEAD_HEALTH_OK"] = "1"
        events: list[ClusterEvent] = []
        with pytest.raises(LaunchFailed) as err:
            async for ev in streamed(
                launch, plan, pool, follow=False, ready_timeout=8, local_env=ENV
            ):
                events.append(ev)
        assert not [e for e in events if isinstance(e, ClusterReady)]
        assert "/health said 200 but no first token came" in err.value.message
        assert "500" in err.value.message and "EngineCore encountered an issue" in (
            err.value.message
        )


async def test_ready_comes_after_a_first_token(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        events = [
            ev
            async for ev in streamed(
                launch, plan, pool, follow=False, ready_timeout=60, local_env=ENV
            )
        ]
        ready = [e for e in events if isinstance(e, ClusterReady)]
        assert len(ready) == 1
        # The engine counted the readiness request: one prompt, one generated token.
        import httpx

        async with httpx.AsyncClient() as client:
            metrics = (await client.get(ready[0].base_url + "/metrics")).text
        assert "vllm:generation_tokens_total" in metrics
        line = next(
            ln for ln in metrics.splitlines() if ln.startswith("vllm:generation_tokens_total")
        )
        assert float(line.rsplit(" ", 1)[1]) >= 1


async def test_a_worker_that_never_meets_the_head_gets_the_rendezvous_remedy(sim_scenario) -> None:
    """The worker knocks on a port nobody listens on and waits there (as real vLLM's ranks
    do behind a firewall, saying nothing): the head waits for it until the ready timeout.
    The failure names the rank that never came, and the remedy the rendezvous address and
    port, the workers' addresses and the firewall, not a generic "read the lines"."""
    import socket

    from spark_tui.core.plan import MASTER_PORT

    with socket.socket() as s:  # a port nobody listens on, on any address
        s.bind(("", 0))
        nobody = s.getsockname()[1]

    async with SimCluster(sim_scenario(2)) as sim, pool_for(sim) as pool:
        plan = await make_plan(pool)
        head, worker = plan.ranks
        argv = worker.container.command
        argv[argv.index(MASTER_PORT) + 1] = str(nobody)
        worker.container.env["SPARK_SIM_RENDEZVOUS_TIMEOUT_S"] = "600"
        with pytest.raises(LaunchFailed) as err:
            async for _ev in streamed(
                launch, plan, pool, follow=False, ready_timeout=6, local_env=ENV
            ):
                pass
        assert f"rank 1 on {worker.node} never became ready" in err.value.message
        remedy = err.value.remedy
        assert f"rendezvous {head.cluster_address}:" in remedy, remedy
        assert f"{worker.node} ({worker.cluster_address})" in remedy, remedy
        assert "firewall" in remedy, remedy

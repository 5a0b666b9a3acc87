"""Simulated nodes stop while a client is still connected (Python 3.12+'s
`Server.wait_closed` waits for every accepted connection to end)."""

from __future__ import annotations

import asyncio

import asyncssh
import pytest

from spark_tui.sim.nodes import SimCluster


@pytest.mark.parametrize("own_loop", [False, True])
async def test_nodes_stop_while_a_client_is_connected(sim_scenario, own_loop: bool) -> None:
    sim = SimCluster(sim_scenario(1), own_loop=own_loop)
    await sim.start()
    node = sim.nodes[0]
    conn = await asyncssh.connect(
        node.address,
        node.port,
        username=node.user,
        client_keys=[str(sim.identity_file)],
        known_hosts=str(sim.known_hosts_path),
        config=None,
    )
    try:
        assert (await conn.run("hostname", check=True)).stdout == f"{node.hostname}\n"
        await asyncio.wait_for(sim.close(), 30)
        # The node hung up on the client too.
        await asyncio.wait_for(conn.wait_closed(), 10)
    finally:
        conn.abort()

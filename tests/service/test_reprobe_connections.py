"""A probe again (the cockpit's `r`, a launch's or a sweep's probe) runs on the session's open
SSH connections and Docker clients: no node sees a new SSH connection (key exchange, login)
nor a new Docker API connection for it; a connection that dropped is opened again, only
that one. Real Session over simulated Sparks, whose SSH servers and Docker APIs count the
connections made to them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.service.ssh_nodes import SshNodes
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base


async def _probed(session: Session, *, first: bool = False) -> ev.Probed:
    events = [e async for e in (session.discover() if first else session.probe())]
    probed = [e for e in events if isinstance(e, ev.Probed)]
    assert len(probed) == 1
    assert all(not f.errors for f in probed[0].nodes), [f.errors for f in probed[0].nodes]
    return probed[0]


async def test_a_probe_again_reuses_the_open_connections_and_reopens_a_dropped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    scenario = Scenario(nodes=3, ssh_port=0, base_address=random_loopback_base(3))
    async with SimCluster(scenario) as sim:
        nodes = SshNodes(sim.inventory)
        session = Session(sim.inventory, nodes=nodes)
        try:
            first = await _probed(session, first=True)
            assert [n.connections_accepted for n in sim.nodes] == [1, 1, 1]
            sessions = [n.exec_sessions for n in sim.nodes]
            docker_connections = [n.docker.connections_accepted for n in sim.nodes]
            for _ in range(2):
                again = await _probed(session)
                assert [f.images for f in again.nodes] == [f.images for f in first.nodes]
                assert all(f.docker_version for f in again.nodes)
            assert [n.connections_accepted for n in sim.nodes] == [1, 1, 1]
            assert [n.docker.connections_accepted for n in sim.nodes] == docker_connections
            # Each probe again did run its command on every node (not facts kept from before).
            assert all(n.exec_sessions > s for n, s in zip(sim.nodes, sessions, strict=True))

            # The second node drops its connection (sshd restarted, a cable pulled and back).
            dropped = sim.nodes[1]
            for conn in list(dropped.connections):
                conn.close()
            conn_of = nodes.pool[dropped.name]
            for _ in range(500):  # until the client has seen the end of it
                if not conn_of.connected:
                    break
                await asyncio.sleep(0.01)
            assert not conn_of.connected
            after = await _probed(session)
            assert [f.name for f in after.nodes] == [n.name for n in sim.nodes]
            assert [f.images for f in after.nodes] == [f.images for f in first.nodes]
            assert [n.connections_accepted for n in sim.nodes] == [1, 2, 1]
        finally:
            await session.close()


async def _allow(host: str, fingerprint: str) -> bool:
    return False  # the simulated nodes' keys are known already


async def test_two_probes_at_once_open_one_docker_client_per_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    scenario = Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(2))
    async with SimCluster(scenario) as sim:

        def docker_clients() -> list[int]:  # each opens with a /_ping
            return [n.docker.pings for n in sim.nodes]

        one = SshNodes(sim.inventory)
        try:
            await one.open(strict=True, confirm=_allow)
            before = docker_clients()
            await one.probe()
            alone = [a - b for a, b in zip(docker_clients(), before, strict=True)]
        finally:
            await one.close()
        two = SshNodes(sim.inventory)
        try:
            await two.open(strict=True, confirm=_allow)
            before = docker_clients()
            results = await asyncio.gather(two.probe(), two.probe())
            together = [a - b for a, b in zip(docker_clients(), before, strict=True)]
        finally:
            await two.close()
    assert all(not f.errors and f.docker_version for r in results for f in r)
    assert together == alone == [1, 1]  # not a client each

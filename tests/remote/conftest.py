"""Fixtures for the remote tests: SSH servers on loopback addresses (see mini_sshd)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest
from mini_sshd import MiniServer


@pytest.fixture
def client_key(tmp_path: Path) -> tuple[Path, asyncssh.SSHAuthorizedKeys]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / "id_ed25519"
    key.write_private_key(str(path))
    os.chmod(path, 0o600)
    authorized = asyncssh.import_authorized_keys(key.export_public_key().decode())
    return path, authorized


@pytest.fixture
async def servers(
    client_key: tuple[Path, asyncssh.SSHAuthorizedKeys],
) -> AsyncIterator[list[MiniServer]]:
    """Two SSH servers on 127.0.0.61 and 127.0.0.62."""
    path, authorized = client_key
    made = [MiniServer(f"127.0.0.{61 + i}", path, authorized) for i in range(2)]
    for s in made:
        await s.start()
    yield made
    for s in made:
        await s.stop()


@pytest.fixture
def sim_scenario():
    """A factory of Scenarios on a random loopback range, free ports, test pace."""
    from spark_tui.sim.nodes import Scenario, random_loopback_base

    def make(nodes: int = 2, **kw: object) -> Scenario:
        kw.setdefault("pace", 0.02)
        return Scenario(nodes=nodes, ssh_port=0, base_address=random_loopback_base(nodes), **kw)

    return make

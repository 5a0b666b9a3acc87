"""What the lab tests of the whole stack (ops, watch, Ray, mods) share: running spark-tui,
a connection pool and a plan on the lab's nodes, the inventory file, a rank's container
(its env, killing it), and the check that a test leaves no container behind."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from labkit import cli, remove_all_containers

from spark_tui.core.inventory import InventoryNode
from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.dockerd import containers

__all__ = [
    "cli",
    "container_env",
    "kill_container",
    "lab_pool",
    "lab_plan",
    "leaves_no_container",
    "write_inventory",
]


def write_inventory(lab: Lab, tmp_path_factory: pytest.TempPathFactory, folder: str) -> Path:
    """The lab's inventory file, as `lab up --inventory` writes it, in a new `folder`."""
    path = tmp_path_factory.mktemp(folder) / "lab.yaml"
    lab.write_inventory(path)
    return path


def leaves_no_container(lab: Lab) -> Iterator[None]:
    """The body of an autouse fixture: after the test, no container is left on any node
    (every one is removed for the next test even when this one failed)."""
    yield
    left = {n.name: containers(n.docker_socket) for n in lab.nodes}
    remove_all_containers(lab)
    assert not any(left.values()), f"containers left behind: {left}"


def lab_pool(nodes: list[InventoryNode]) -> Any:
    """A connection pool on the lab's nodes (not opened): no ssh config, short timeouts."""
    from spark_tui.remote.ssh import ConnectionPool

    return ConnectionPool(nodes, ssh_config=(), connect_timeout=5, backoff_max=1.0)


async def lab_plan(pool: Any, recipe: str | Path, overrides: Iterable[str] = ()) -> Any:
    """The launch plan of `recipe` (a name or a file) for the pool's probed nodes."""
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.plan import build_plan
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.remote.probe import probe_pool

    found = find_recipe(str(recipe))
    facts = await probe_pool(pool)
    return build_plan(found, apply_overrides(found, list(overrides)), facts)


def container_env(lab: Lab, index: int, name: str) -> dict[str, str]:
    """The environment of container `name` on node `index`, from its own dockerd."""
    client = docker.DockerClient(base_url=f"unix://{lab.node(index).docker_socket}")
    try:
        raw = client.containers.get(name).attrs["Config"]["Env"]
    finally:
        client.close()
    return dict(item.split("=", 1) for item in raw)


def kill_container(lab: Lab, index: int, name: str) -> None:
    """Kill container `name` on node `index` behind spark-tui's back (through its dockerd)."""
    client = docker.DockerClient(base_url=f"unix://{lab.node(index).docker_socket}")
    try:
        client.containers.get(name).kill()
    finally:
        client.close()

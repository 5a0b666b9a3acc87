"""Faults a real cluster meets, on the namespace lab (real sshd + dockerd): a node's sshd
gone for a while (a link drop is not a failure), interrupts at every phase of a launch
(nothing is left behind), a rank that ignores SIGTERM (stop still ends it), and the lab's
own runc wrapper (silent, and `docker exec` works)."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest
from labkit import lab_guard

from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.image import LAB_IMAGE

lab_guard()

pytestmark = pytest.mark.lab


def _client(lab: Lab, index: int) -> docker.DockerClient:
    return docker.DockerClient(base_url=f"unix://{lab.node(index).docker_socket}")


@pytest.fixture(autouse=True)
def _no_containers_left(lab: Lab) -> Iterator[None]:
    """Every test starts and ends with no container on any node."""
    yield
    left = {}
    for node in lab.nodes:  # clean up for the next test even when this one failed
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        left[node.name] = [c.name for c in client.containers.list(all=True)]
        for c in client.containers.list(all=True):
            c.remove(force=True)
        client.close()
    assert not any(left.values()), f"containers left behind: {left}"


def test_docker_exec_works_in_a_rank_like_container_and_its_log_starts_clean(lab: Lab) -> None:
    """A container with the playbook's limits (nofile 1048576, privileged) runs, `docker
    exec` into it works, and the lab's runc wrapper wrote nothing into its log."""
    client = _client(lab, 1)
    c = None
    try:
        c = client.containers.run(
            LAB_IMAGE,
            ["sh", "-c", "echo started; exec sleep 600"],
            name="lab-exec-check",
            network_mode="host",
            privileged=True,
            ulimits=[docker.types.Ulimit(name="nofile", soft=1048576, hard=1048576)],
            detach=True,
        )
        code, out = c.exec_run(["sh", "-c", "echo inside"])
        assert code == 0, out.decode()
        assert out.decode().strip() == "inside"
        log = c.logs().decode()
        assert log.splitlines()[:1] == ["started"], log
    finally:
        if c is not None:
            c.remove(force=True)
        client.close()

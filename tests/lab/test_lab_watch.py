"""After `launch --wait` returns, on real sshd and dockerd: `watch` sees the worker killed and
exits 1 with the failed rank, its lines and the clean-up command; `status` then says failed,
why, and the same command; that command leaves no container."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from fixtures_stack import cli, leaves_no_container, write_inventory
from labkit import lab_guard

from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.dockerd import containers

lab_guard()

pytestmark = pytest.mark.lab

RECIPE = "glm-5.3-flash"


@pytest.fixture(scope="module")
def inventory(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_inventory(lab, tmp_path_factory, "lab-watch")


@pytest.fixture(autouse=True)
def _no_containers_left(lab: Lab) -> Iterator[None]:
    """The test ends with no container on any node (removed here for the next test if not)."""
    yield from leaves_no_container(lab)


def test_watch_reports_a_worker_killed_after_ready_and_status_says_failed(
    lab: Lab, inventory: Path
) -> None:
    inv = str(inventory)
    # The lab has no model facts in its HF cache: the fit is unknown, so --force.
    launched = cli(
        "launch", RECIPE, "--inventory", inv, "--wait", "--force", "--ready-timeout", "90"
    )
    assert launched.returncode == 0, launched.stderr
    status = cli("status", "--inventory", inv, "--json")
    assert status.returncode == 0, status.stderr
    (cluster,) = json.loads(status.stdout)["clusters"]
    worker = next(r for r in cluster["ranks"] if r["rank"] == 1)

    watch = subprocess.Popen(
        [
            *(sys.executable, "-m", "spark_tui", "watch", "--inventory", inv),
            *("--interval", "1", "--keep-failed"),  # the ranks stay for `status` to diagnose
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert watch.stdout is not None
        seen: list[str] = []
        for line in watch.stdout:
            seen.append(line)
            if line.startswith("probe ok"):
                break
        assert seen and seen[-1].startswith("probe ok"), "".join(seen) + watch.stderr.read()
        node = lab.nodes[[n.name for n in lab.nodes].index(worker["node"])]
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        try:
            client.containers.get(worker["container"]).kill()
        finally:
            client.close()
        killed = time.monotonic()
        out, err = watch.communicate(timeout=60)
        took = time.monotonic() - killed
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    print(f"watch reported the killed worker {took:.1f} s after the kill")
    assert watch.returncode == 1, "".join(seen) + out + err
    assert f"FAILED: rank 1 on {worker['node']} was killed" in err
    failed_at = err.index("FAILED:")
    assert "  | " in err[failed_at:], "the failed rank's lines come with the alert"
    # The clean-up names the cluster, the same in watch and status.
    cleanup = f"spark-tui stop --inventory {inv} --cluster {cluster['cluster_id']}"
    assert f"clean up: {cleanup}\n" in err

    status = cli("status", "--inventory", inv)
    assert status.returncode == 1, status.stdout + status.stderr
    head_line = status.stdout.splitlines()[0]
    assert cluster["cluster_id"] in head_line and " failed " in head_line
    assert f"failed: rank 1 on {worker['node']} was killed" in status.stdout
    assert f"clean up: {cleanup}" in status.stdout

    stopped = cli(*cleanup.split()[1:])
    assert stopped.returncode == 0, stopped.stderr
    for n in lab.nodes:
        assert containers(n.docker_socket) == [], f"a container is left on {n.name}"
    assert cli("status", "--inventory", inv).returncode == 0

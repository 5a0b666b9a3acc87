"""`spark-tui lab up|status|down` through the CLI: up on a dirty lab cleans first, down
removes every namespace, link, process, cgroup, mount and file the lab made, and is
idempotent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docker
import pytest
from labkit import (
    claim,
    footprint,
    lab_guard,
    leftovers,
    release,
    ssh_banner,
    unique_config,
)

from spark_tui.core.inventory import parse_inventory
from spark_tui.sim.lab import Lab, procs
from spark_tui.sim.lab.image import LAB_IMAGE

lab_guard()

pytestmark = pytest.mark.lab


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_tui", "lab", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_cli_up_twice_then_down_leaves_nothing(tmp_path: Path) -> None:
    cfg = unique_config(1)
    claim(cfg)
    inventory = tmp_path / "lab.yaml"
    common = ["--state-dir", str(cfg.state_dir)]
    up = [*common, "--nodes", "1", "--prefix", cfg.prefix, "--subnet", cfg.subnet]
    try:
        first = _cli("up", *up, "--inventory", str(inventory))
        assert first.returncode == 0, first.stderr
        assert "image:" in first.stdout and "inventory written" in first.stdout
        lab = Lab.load(cfg.state_dir)
        assert lab is not None
        old_keeper = lab.keeper_pid(1)
        nodes = parse_inventory(inventory.read_text())
        assert [(n.host, n.port, n.user) for n in nodes] == [(lab.node(1).address, 22, "root")]
        assert nodes[0].known_hosts == str(cfg.known_hosts)

        # Up again on the running lab: the old one is cleaned first.
        again = _cli("up", *up, "--inventory", str(inventory))
        assert again.returncode == 0, again.stderr
        assert not procs.alive(old_keeper)
        assert ssh_banner(lab.node(1).address).startswith(b"SSH-2.0-OpenSSH")

        # Something running on the node: a container and an SSH session.
        client = docker.DockerClient(base_url=f"unix://{lab.node(1).docker_socket}")
        client.containers.run(LAB_IMAGE, ["sleep", "600"], network_mode="host", detach=True)
        client.close()
        session = subprocess.Popen(
            [
                "ssh",
                "-i",
                str(cfg.client_key),
                "-o",
                f"UserKnownHostsFile={cfg.known_hosts}",
                "-o",
                "BatchMode=yes",
                f"root@{lab.node(1).address}",
                "sleep 600",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        status = _cli("status", *common)
        assert status.returncode == 0, status.stderr
        assert "sshd up" in status.stdout and "containers 1" in status.stdout

        fp = footprint(lab)
        assert len(fp.pids) >= 5  # keeper, dockerd, containerd, shim, sshd, ...
        down = _cli("down", *common)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "everything removed" in down.stdout
        assert leftovers(fp) == []
        session.wait(timeout=10)
        # Idempotent: down again finds nothing and succeeds.
        assert _cli("down", *common).returncode == 0
        status = _cli("status", *common)
        assert status.returncode == 1 and "no lab is up" in status.stderr
    finally:
        left = Lab(cfg).down(quiet=True)
        release(cfg)
        assert not left

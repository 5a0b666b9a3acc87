"""`spark-tui sim` as a user runs it: inventory written, SIGTERM leaves no process behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from spark_tui.core.inventory import parse_inventory
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.sim.nodes.images import bundled_image_refs


def _children(pid: int) -> set[int]:
    """Every descendant of `pid`, from /proc (no psutil)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _sim(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "spark_tui", "sim", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A temp folder with a short path: the nodes' Docker sockets are in the state dir only
    while their path fits a unix socket's (a pytest-xdist worker's tmp_path is deeper)."""
    with tempfile.TemporaryDirectory(prefix="simcmd-") as folder:
        yield Path(folder)


def test_sim_writes_the_inventory_and_stops_everything_on_sigterm(
    tmp_path: Path, short_dir: Path
) -> None:
    inventory = tmp_path / "inv.yaml"
    state = short_dir / "state"
    base = random_loopback_base()
    proc = _sim(
        "--nodes", "2", "--inventory", str(inventory), "--ssh-port", "0",
        "--base-address", base, "--state-dir", str(state), "--pace", "0.05",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not inventory.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        nodes = parse_inventory(inventory.read_text())
        assert [n.name for n in nodes] == ["sim-spark-1", "sim-spark-2"]
        assert nodes[0].host == base and nodes[0].port and nodes[0].identity_file
        # A running container gives the command a grandchild to clean up.
        client = docker.DockerClient(base_url=f"unix://{state}/sockets/1.docker.sock")
        container = client.containers.run(
            bundled_image_refs()[0], ["sh", "-c", "sleep 60 & sleep 60"], detach=True
        )
        container.reload()
        client.close()
        descendants = _children(proc.pid)
        assert int(container.attrs["State"]["Pid"]) in descendants
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "sim-spark-1" in out and f"spark-tui probe --inventory {inventory}" in out
    assert "Stopped" in out
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in descendants) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in descendants if _alive(p)]
    assert not (state / "sockets" / "1.docker.sock").exists()


def test_sim_refuses_bad_input_with_a_remedy(tmp_path: Path) -> None:
    proc = _sim("--nodes", "0", "--inventory", str(tmp_path / "inv.yaml"))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "need at least one node" in err and "remedy:" in err


def test_sim_says_when_its_address_is_taken(tmp_path: Path) -> None:
    base = random_loopback_base(1)
    with socket.socket() as taken:
        taken.bind((base, 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _sim(
            "--nodes", "1", "--inventory", str(tmp_path / "inv.yaml"),
            "--base-address", base, "--ssh-port", str(port),
        )  # fmt: skip
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    assert "already in use" in err and "--ssh-port 0" in err
    assert "Traceback" not in err
    assert not os.path.exists(tmp_path / "inv.yaml")

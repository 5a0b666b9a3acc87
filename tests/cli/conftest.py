"""Fixtures for the CLI contract tests: run `spark-tui` as a user would, in a subprocess, with
its own config and data folders, and a `spark-tui sim` cluster in the background."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from spark_tui.sim.engine import catalogue

GLM = "nvidia/GLM-5.3-Flash-FP4-Local"
# The 128 GB figures are a GB10's /proc/meminfo (MemTotal 125513720 kB); 64 GB is scaled.
MEM_128 = 125513720 * 1024
MEM_64 = MEM_128 // 2


@dataclass
class Cli:
    """Runs `python -m spark_tui ...` with an isolated environment."""

    env: dict[str, str]
    cwd: Path

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        full_env = dict(self.env)
        full_env.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "spark_tui", *args],
            env=full_env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def _cli_env(root: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        # A developer's token or pace must not change what the contract tests see.
        if not k.startswith(("XDG_", "SPARK_", "HF_")) and k != "HUGGING_FACE_HUB_TOKEN"
    }
    env.update(
        XDG_CONFIG_HOME=str(root / "config"),
        XDG_DATA_HOME=str(root / "data"),
        SPARK_TUI_DATA_DIR=str(root / "data" / "spark-tui"),
        HOME=str(root / "home"),
        NO_COLOR="1",
        COLUMNS="120",
        # Never the real Hub: a closed local port (tests wanting one run the simulated Hub).
        HF_ENDPOINT="http://127.0.0.1:9",
    )
    (root / "home").mkdir(parents=True, exist_ok=True)
    return env


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """A CLI runner whose config, data and home folders live in one module-wide temp folder
    (so the run history persists between the commands of one module)."""
    root = tmp_path_factory.mktemp("cli")
    return Cli(env=_cli_env(root), cwd=root)


def node_entry(name: str, address: str, netdev: str, rdma: str, ipv4: str, mem: int) -> dict:
    """One facts-file node: a GB10 with one up ConnectX link and the GLM model in its cache,
    whose config and weight size are the simulated catalogue's (the simulated world's truth)."""
    index = catalogue.safetensors_index(GLM)
    return {
        "name": name,
        "address": address,
        "arch": "aarch64",
        "gpu_name": "NVIDIA GB10",
        "memory_total_bytes": mem,
        "memory_available_bytes": mem - 4 * 2**30,
        "interfaces": [
            {
                "netdev": netdev,
                "rdma_device": rdma,
                "state": "up",
                "ipv4": ipv4,
                "speed_mbps": 200000,
            }
        ],
        "images": [],
        "models": [
            {
                "repo_id": GLM,
                "weight_bytes": index["metadata"]["total_size"],
                "config": catalogue.hf_config(GLM),
            }
        ],
    }


def facts_for(mem: int) -> dict:
    """Two GB10 nodes whose ConnectX names differ (as on real Sparks: port 0 vs port 1)."""
    return {
        "nodes": [
            node_entry("spark-a", "10.0.0.10", "enp1s0f1np1", "rocep1s0f1", "192.168.100.10", mem),
            node_entry(
                "spark-b", "10.0.0.11", "enP2p1s0f1np1", "roceP2p1s0f1", "192.168.100.11", mem
            ),
        ]
    }


@pytest.fixture(scope="module")
def facts_128(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("facts") / "facts_2x128.json"
    path.write_text(json.dumps(facts_for(MEM_128), indent=1))
    return path


@pytest.fixture(scope="module")
def facts_64(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("facts") / "facts_2x64.json"
    path.write_text(json.dumps(facts_for(MEM_64), indent=1))
    return path


# --- processes -------------------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[int, int, str, int] | None:
    """(ppid, session id, state, start time) of a live process, or None when gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: split after the last ')'.
    rest = raw[raw.rindex(")") + 2 :].split()
    return int(rest[1]), int(rest[3]), rest[0], int(rest[19])


def descendants(root: int) -> set[tuple[int, int]]:
    """(pid, start time) of every live process below `root` or in its session."""
    table: dict[int, tuple[int, int, str, int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _proc_stat(int(entry.name))
            if st is not None and st[2] != "Z":
                table[int(entry.name)] = st
    found: set[int] = {pid for pid, st in table.items() if st[1] == root and pid != root}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, st in table.items():
            if st[0] == parent and pid not in found:
                found.add(pid)
                frontier.append(pid)
    return {(pid, table[pid][3]) for pid in found}


def still_alive(procs: set[tuple[int, int]]) -> set[int]:
    """The pids of `procs` that still run (same pid and start time, not a zombie)."""
    alive = set()
    for pid, start in procs:
        st = _proc_stat(pid)
        if st is not None and st[3] == start and st[2] != "Z":
            alive.add(pid)
    return alive


@dataclass
class SimProcess:
    """A background `spark-tui sim` and what it wrote."""

    proc: subprocess.Popen[str]
    inventory: Path
    log: Path
    seen: set[tuple[int, int]] = field(default_factory=set)

    def snapshot(self) -> None:
        """Remember every process the sim has started so far (checked at teardown)."""
        self.seen |= descendants(self.proc.pid)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _wait_for_inventory(sim: SimProcess, nodes: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sim.proc.poll() is not None:
            raise AssertionError(
                f"`spark-tui sim` exited with {sim.proc.returncode} before writing its inventory:"
                f"\n{sim.output()}"
            )
        # The file is written in one go before the "Running" line: wait for both.
        if sim.inventory.exists() and "Running" in sim.output():
            data = yaml.safe_load(sim.inventory.read_text())
            if isinstance(data, dict) and len(data.get("nodes") or []) == nodes:
                return
        time.sleep(0.1)
    raise AssertionError(f"`spark-tui sim` wrote no inventory in {timeout} s:\n{sim.output()}")


def _stop(sim: SimProcess) -> set[int]:
    """SIGTERM the sim, wait, and return the pids of its processes still alive afterwards."""
    sim.snapshot()
    if sim.proc.poll() is None:
        sim.proc.send_signal(signal.SIGTERM)
        try:
            sim.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            sim.proc.kill()
            sim.proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    left = still_alive(sim.seen)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = still_alive(sim.seen)
    return left


@contextlib.contextmanager
def running_sim(cli: Cli, root: Path, nodes: int = 2) -> Iterator[SimProcess]:
    """`spark-tui sim --nodes N` in the background at test pace, on a loopback range of its
    own and any free SSH port (other tests may run a sim at the default address); stopped
    on leaving, and checked to leave no process behind."""
    inventory = root / "inventory.yaml"
    log = root / "sim.log"
    base = f"127.{random.randint(100, 250)}.{random.randint(1, 250)}.11"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "spark_tui",
                "sim",
                "--nodes",
                str(nodes),
                "--inventory",
                str(inventory),
                "--pace",
                "0.05",
                "--ssh-port",
                "0",
                "--base-address",
                base,
                "--state-dir",
                str(root / "state"),
            ],
            env=dict(cli.env, SPARK_SIM_PACE="0.05"),
            cwd=root,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            # Its own session: teardown can find (and, if need be, kill) everything it started.
            start_new_session=True,
        )
    sim = SimProcess(proc=proc, inventory=inventory, log=log)
    try:
        _wait_for_inventory(sim, nodes=nodes, timeout=30)
        yield sim
    finally:
        left = _stop(sim)
        if left:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        assert sim.proc.returncode is not None
        assert not left, f"`spark-tui sim` left processes running after SIGTERM: {sorted(left)}"


@pytest.fixture(scope="module")
def sim(cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    """Two simulated Sparks for the module (see `running_sim`)."""
    with running_sim(cli, tmp_path_factory.mktemp("sim")) as sim:
        yield sim

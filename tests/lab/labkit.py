"""Helpers of the lab tests: the skip-or-fail guard, unique lab names, clean-state checks,
and what the fault drills share (running spark-tui, reading its output, the nodes' sshd and
containers)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import pytest

from spark_tui.sim.lab import Lab, LabConfig, procs, unavailable_reason
from spark_tui.sim.lab.network import NETNS_DIR, lab_links, lab_namespaces

TEST_STATE_ROOT = Path("/var/tmp")
TEST_STATE_GLOB = "spark-tui-labtest-*"
# Beside the state dir, not in it: `lab up` empties the state dir first, and a lab whose
# owner cannot be read is swept by the next session, even one still under test.
OWNER_SUFFIX = ".owner"
# The mark inside the state dir that earlier sessions read (written again after up).
OWNER_FILE = "pytest-owner.pid"


def owner_file(state_dir: Path) -> Path:
    return state_dir.with_name(state_dir.name + OWNER_SUFFIX)


def lab_guard() -> None:
    """Skip the calling module with the reason when the lab cannot run here; under CI=true
    the lab tests are required, so the reason fails the run instead."""
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"tests/lab are required under CI=true, but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


_HANDED_OUT: set[str] = set()


def routed_networks() -> list[ipaddress.IPv4Network]:
    """The networks the host routes now (every running lab's bridge and ring cables among them)."""
    out = subprocess.run(["ip", "-j", "-4", "route", "show"], capture_output=True, text=True).stdout
    nets = []
    for route in json.loads(out or "[]"):
        dst = route.get("dst", "")
        if dst and dst != "default":
            with contextlib.suppress(ValueError):
                nets.append(ipaddress.IPv4Network(dst, strict=False))
    return nets


def unique_config(nodes: int, **kwargs: object) -> LabConfig:
    """A lab with its own prefix, subnet and state dir, so test runs never share names."""
    rng = random.SystemRandom()
    tag = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(5))
    prefix = f"lt{tag}"
    taken = [ipaddress.IPv4Network(n) for n in _HANDED_OUT] + routed_networks()
    candidates = (ipaddress.IPv4Network(f"10.77.{n}.0/24") for n in range(100, 251))
    subnet = str(rng.choice([c for c in candidates if not any(c.overlaps(t) for t in taken)]))
    # Session labs stay up while module labs come and go: a subnet drawn blindly collided
    # with one of them now and then, and the new lab refused to start.
    _HANDED_OUT.add(subnet)
    state_dir = TEST_STATE_ROOT / f"spark-tui-labtest-{prefix}"
    return LabConfig(nodes=nodes, prefix=prefix, subnet=subnet, state_dir=state_dir, **kwargs)  # type: ignore[arg-type]


def claim(cfg: LabConfig) -> None:
    """Mark the state dir as this pytest process's (so a later run can sweep it if we die)."""
    cfg.state_dir.mkdir(parents=True, exist_ok=True)
    (cfg.state_dir / ".spark-tui-lab").touch()
    owner_file(cfg.state_dir).write_text(str(os.getpid()))
    (cfg.state_dir / OWNER_FILE).write_text(str(os.getpid()))


def release(cfg: LabConfig) -> None:
    """The lab is down: its owner mark goes too."""
    owner_file(cfg.state_dir).unlink(missing_ok=True)


def sweep_stale_test_labs() -> None:
    """Take down test labs whose pytest process is gone (a run that was killed). A lab whose
    owner cannot be read is left alone: it may be another session's, still under test."""
    for d in TEST_STATE_ROOT.glob(TEST_STATE_GLOB):
        if d.name.endswith(OWNER_SUFFIX) and not d.with_name(d.name[: -len(OWNER_SUFFIX)]).exists():
            _drop_orphan_mark(d)
            continue
        if not d.is_dir():
            continue
        owner = 0
        for mark in (owner_file(d), d / OWNER_FILE):
            try:
                owner = int(mark.read_text())
                break
            except (OSError, ValueError):
                continue
        if not owner or procs.alive(owner):
            continue
        lab = Lab.load(d)
        if lab is not None:
            lab.down(quiet=True)
        elif not _mounted_under(d):
            # Killed before its state was written: no namespace or daemon was recorded to
            # take down, and nothing is mounted there, so only its files (images, a
            # node's docker root: gigabytes) are left.
            shutil.rmtree(d, ignore_errors=True)
        if not d.exists():
            owner_file(d).unlink(missing_ok=True)


def _drop_orphan_mark(mark: Path) -> None:
    """An owner mark left by a lab whose folder is gone: dropped once its owner is."""
    try:
        owner = int(mark.read_text())
    except (OSError, ValueError):
        return
    if not procs.alive(owner):
        mark.unlink(missing_ok=True)


def _mounted_under(d: Path) -> bool:
    """Whether any mount point lies in d (a lab killed half-way may leave its overlays)."""
    root = str(d.resolve()) + "/"
    with open("/proc/self/mountinfo", encoding="utf-8") as mounts:
        return any((line.split()[4] + "/").startswith(root) for line in mounts)


@dataclass
class Footprint:
    """What a lab had on the host, recorded while up, to prove `down` removed all of it."""

    prefix: str
    state_dir: Path
    namespaces: list[str] = field(default_factory=list)
    ns_ids: set[str] = field(default_factory=set)
    pids: set[int] = field(default_factory=set)
    cgroups: list[Path] = field(default_factory=list)


def footprint(lab: Lab) -> Footprint:
    fp = Footprint(prefix=lab.cfg.prefix, state_dir=lab.cfg.state_dir)
    fp.namespaces = lab_namespaces(lab.cfg.prefix)
    for ns in fp.namespaces:
        nid = procs.netns_file_id(NETNS_DIR / ns)
        if nid:
            fp.ns_ids.add(nid)
    for i in range(1, lab.cfg.nodes + 1):
        mnt = procs.ns_id(lab.keeper_pid(i), "mnt")
        if mnt:
            fp.ns_ids.add(mnt)
    fp.pids = procs.pids_in_namespaces(fp.ns_ids)
    for node in lab.nodes:
        fp.cgroups.extend(procs.cgroup_dirs(node.cgroup_parent))
    return fp


def leftovers(fp: Footprint) -> list[str]:
    """Everything of the footprint that is still there (empty when the lab is gone)."""
    left = []
    deadline = time.monotonic() + 5
    alive = {p for p in fp.pids if procs.alive(p)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {p for p in alive if procs.alive(p)}
    left += [f"process {p}" for p in sorted(alive)]
    left += [f"process {p} in a lab namespace" for p in procs.pids_in_namespaces(fp.ns_ids)]
    left += [f"namespace {n}" for n in lab_namespaces(fp.prefix)]
    left += [f"link {n}" for n in lab_links(fp.prefix)]
    left += [f"cgroup {c}" for c in fp.cgroups if c.exists()]
    left += [f"mount {m}" for m in procs.mounts_under(fp.state_dir)]
    if fp.state_dir.exists():
        left.append(f"state dir {fp.state_dir}")
    return left


@contextlib.contextmanager
def running_lab(cfg: LabConfig) -> Iterator[Lab]:
    """The lab of `cfg`, up (claimed for this test run) while the block runs; down after it,
    checked clean: nothing it left (processes, namespaces, links, mounts, files)."""
    claim(cfg)
    the_lab = Lab(cfg)
    try:
        the_lab.up()
        claim(cfg)  # (up emptied the state dir, and the mark in it with it)
        fp = footprint(the_lab)
        yield the_lab
    finally:
        left = the_lab.down(quiet=True)
        if not left:
            release(cfg)
    assert not left, f"lab down left: {left}"
    assert not leftovers(fp), f"lab down left: {leftovers(fp)}"


@contextlib.contextmanager
def launched(
    recipe: Path, inventory: Path, *flags: str, ready_timeout: int, stop_timeout: float = 180
) -> Iterator[subprocess.CompletedProcess[str]]:
    """`spark-tui launch RECIPE --inventory INV FLAGS --wait --replace` while the block runs
    (its result given to the block, which checks it), then `stop` of that inventory."""
    res = cli(
        "launch",
        str(recipe),
        "--inventory",
        str(inventory),
        *flags,
        "--wait",
        "--replace",
        "--ready-timeout",
        str(ready_timeout),
        timeout=ready_timeout + 120,
    )
    try:
        yield res
    finally:
        cli("stop", "--inventory", str(inventory), timeout=stop_timeout)


def ssh_banner(address: str, timeout: float = 1.0) -> bytes:
    with socket.create_connection((address, 22), timeout=timeout) as s:
        return s.recv(64)


# --- driving the lab's nodes and spark-tui (shared by the fault drills) --------------------


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`spark-tui ARGS` as a user runs it (no terminal, no input)."""
    return subprocess.run(
        [sys.executable, "-m", "spark_tui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def spark_tui(*args: str, raw: bool = False, **kw: Any) -> subprocess.Popen[Any]:
    """`spark-tui ARGS` started in the background, its output piped; `raw`: as bytes, so
    that `Lines` splits them at newlines only (text mode also splits at a lone carriage
    return, which progress bars in vLLM's log carry)."""
    return subprocess.Popen(
        [sys.executable, "-m", "spark_tui", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=not raw,
        **kw,
    )


class Lines:
    """A child's output lines, read by a thread as they come."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            if isinstance(line, bytes):
                line = line.decode("utf-8", "replace")
            self.lines.append(line.rstrip("\n"))

    def has(self, text: str) -> bool:
        return any(text in ln for ln in self.lines)

    def join(self, timeout: float = 10) -> str:
        self._thread.join(timeout)
        return "\n".join(self.lines)


def socket_dirs(pid: int) -> list[str]:
    """The SSH forward socket folders a spark-tui process made (named with its pid)."""
    return sorted(str(p) for p in Path(tempfile.gettempdir()).glob(f"spark-tui-{pid}-*"))


async def until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait (polling) until `cond()` holds; fail the test naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def docker_client(lab: Lab, index: int, timeout: int = 60) -> docker.DockerClient:
    """A Docker client of node `index`'s own dockerd."""
    return docker.DockerClient(base_url=f"unix://{lab.node(index).docker_socket}", timeout=timeout)


def real_vllm_to_end(
    lab: Lab, argv: list[str], env: dict[str, str], index: int = 1
) -> tuple[int, str]:
    """Run the lab's real-vLLM image on node `index` with `argv` and `env` (the node's
    Hugging Face cache mounted, host network) until it exits; (exit code, its whole output)."""
    from spark_tui.sim.lab import vllm_image

    client = docker_client(lab, index, timeout=600)
    try:
        c = client.containers.run(
            vllm_image.VLLM_IMAGE,
            argv,
            environment=env,
            volumes={
                f"{lab.node(index).home}/.cache/huggingface": {
                    "bind": "/root/.cache/huggingface",
                    "mode": "ro",
                }
            },
            network_mode="host",
            detach=True,
        )
        try:
            out = b"".join(c.logs(stream=True, follow=True))
            return int(c.wait(timeout=600)["StatusCode"]), out.decode("utf-8", "replace")
        finally:
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)
    finally:
        client.close()


def all_containers(lab: Lab) -> dict[str, list[str]]:
    """Every container (any state) on every node, by node name."""
    out = {}
    for node in lab.nodes:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        try:
            out[node.name] = sorted(c.name for c in client.containers.list(all=True))
        finally:
            client.close()
    return out


def remove_all_containers(lab: Lab) -> None:
    """Force-remove every container on every node (a failed test's clean-up)."""
    for node in lab.nodes:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}", timeout=120)
        try:
            for c in client.containers.list(all=True):
                c.remove(force=True)
        finally:
            client.close()


def container_log(lab: Lab, index: int, container: str) -> list[str]:
    """The container's whole log as Docker has it (the ground truth to compare with)."""
    client = docker_client(lab, index)
    try:
        raw = client.containers.get(container).logs().decode("utf-8", "replace")
    finally:
        client.close()
    return [ln.rstrip("\r") for ln in raw.split("\n")][:-1]


def ensure_sshd(lab: Lab, index: int) -> None:
    """Node `index` answers SSH again (after a test that failed while it was stopped)."""
    try:
        if ssh_banner(lab.node(index).address).startswith(b"SSH-"):
            return
    except OSError:
        pass
    lab.stop_sshd(index)  # any session left without its listener
    lab.start_sshd(index)

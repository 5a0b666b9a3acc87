"""The fault drills on REAL vLLM (0.32, CPU build) across two lab nodes, where spark-tui's
behaviour depends on what vLLM does (LAB-NOTES "Real vLLM on CPU"): a node down at launch;
Ctrl+C and SIGTERM at the phases where real vLLM differs from the stand-in (before the plan,
while the containers are created, while vLLM loads, while its head waits for a peer it never
gets - deaf to SIGTERM -, just before ready); a rank that cannot reach the rendezvous; then on
ONE ready cluster, in this order, the drills that keep it: `logs --follow` through a 15 s sshd
outage, the cockpit killed and started again (it re-attaches), and last the worker killed
while the re-attached cockpit watches. Each drill ends with what is reported, the logs
without loss or duplication, and no container the user does not know about.

One real-vLLM lab (the session's) serves the module; the tests run in file order (the ready
cluster is made by the first test that asks for it). Select them with `-m vllm`; run them
under `flock /tmp/lab.lock` (real vLLM on two cores is slow enough alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from labkit import (
    Lines,
    all_containers,
    cli,
    container_log,
    docker_client,
    ensure_sshd,
    lab_guard,
    remove_all_containers,
    socket_dirs,
    spark_tui,
    until,
)

from spark_tui.core import logclass
from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.network import NETNS_DIR

lab_guard()

pytestmark = [pytest.mark.lab, pytest.mark.vllm]

READY_TIMEOUT = 900  # seconds: two real vLLM ranks on a busy 2-core machine
# Long enough for real vLLM's head to reach its wait for the worker (imports take ~45 s
# on an idle machine), short enough to keep the drill in minutes.
RENDEZVOUS_READY_TIMEOUT = 150
MARKER_TIMEOUT = 600  # real vLLM's startup steps, under load


@pytest.fixture(scope="module")
def files(vllm_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The inventory and, next to it, the recipe `lab up --engine vllm` writes."""
    d = tmp_path_factory.mktemp("vllm-drills")
    inventory = d / "lab.yaml"
    vllm_lab.write_inventory(inventory)
    recipe = vllm_lab.write_recipe(d)
    assert recipe is not None
    return {"dir": d, "inventory": inventory, "recipe": recipe}


@pytest.fixture(autouse=True)
def _shared_flag_cache(
    request: pytest.FixtureRequest,
) -> None:
    """The session's flag cache (the image's `vllm serve --help=all` read once), except for
    the interrupts before the plan: there the launch is still reading it, in a throwaway
    container that must go too."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.id.startswith("before-plan"):
        return
    request.getfixturevalue("shared_flag_cache")


@pytest.fixture(scope="module", autouse=True)
def _timed(vllm_lab: Lab) -> Iterator[None]:
    """The module's runtime, printed (figures are reported, never asserted)."""
    started = time.monotonic()
    yield
    print(f"\nreal-vLLM drills: {time.monotonic() - started:.0f} s")
    remove_all_containers(vllm_lab)  # (only after a failed drill is there anything)


def _no_container(lab: Lab, said: str = "") -> None:
    left = all_containers(lab)
    assert left == {n.name: [] for n in lab.nodes}, f"containers left: {left}\n{said[-3000:]}"


@contextlib.contextmanager
def _firewall(lab: Lab) -> Iterator[None]:
    """Node 2 cannot reach node 1 over TCP (a firewall in its namespace drops the packets):
    real vLLM's worker never meets its head, whose wait in gloo ignores SIGTERM."""
    ns = ["ip", "netns", "exec", lab.node(2).netns, "iptables"]
    rule = ["OUTPUT", "-d", lab.node(1).address, "-p", "tcp", "-j", "DROP"]
    assert (NETNS_DIR / lab.node(2).netns).exists()
    subprocess.run([*ns, "-I", *rule], check=True)
    try:
        yield
    finally:
        subprocess.run([*ns, "-D", *rule], check=False)


# --- a node down at launch ----------------------------------------------------------------


def test_a_node_down_at_launch_is_named_and_nothing_starts(
    vllm_lab: Lab, files: dict[str, Path]
) -> None:
    """Node 2's SSH answers nothing (its namespace drops the packets, as for a node that is
    powered off): the launch names the node with a remedy, exits 3 and starts no rank on
    any node."""
    ns = ["ip", "netns", "exec", vllm_lab.node(2).netns, "iptables"]
    rule = ["INPUT", "-p", "tcp", "--dport", "22", "-j", "DROP"]
    subprocess.run([*ns, "-I", *rule], check=True)
    try:
        proc = spark_tui(
            "launch", str(files["recipe"]), "--inventory", str(files["inventory"]), "--wait"
        )
        out, err = proc.communicate(timeout=180)
    finally:
        subprocess.run([*ns, "-D", *rule], check=False)
    said = out + err
    assert proc.returncode == 3, said
    assert f"{vllm_lab.node(2).name} (root@{vllm_lab.node(2).address}:22)" in err, said
    assert "no answer within" in err and "remedy" in err, said
    assert "Traceback" not in said
    assert socket_dirs(proc.pid) == [], "the refused launch left socket folders"
    _no_container(vllm_lab, said)


# --- interrupts at every phase of a launch ------------------------------------------------


def _head_phase(scope: str) -> Callable[[str], bool]:
    """A progress line of the head's log that the classifier puts at startup step `scope`."""

    def seen(line: str) -> bool:
        if not line.startswith("[0 "):
            return False
        text = line.split("] ", 1)[-1]
        got = logclass.classify(text)
        return got.kind == "phase" and got.scope == scope

    return seen


def _says(text: str) -> Callable[[str], bool]:
    return lambda line: text in line


# (id, what marks the phase on the launch's stderr, delay after it, signal, firewalled)
PHASES: list[tuple[str, Callable[[str], bool], float, int, bool]] = [
    ("before-plan-ctrl-c", _says("connecting to"), 0.0, signal.SIGINT, False),
    ("before-plan-sigterm", _says("connecting to"), 0.0, signal.SIGTERM, False),
    ("creating-ctrl-c", _says("as cluster"), 0.1, signal.SIGINT, False),
    ("creating-sigterm", _says("as cluster"), 0.1, signal.SIGTERM, False),
    # vLLM imports and initialises its engine (tens of seconds on a CPU).
    ("loading-sigterm", _head_phase("engine_init"), 0.0, signal.SIGTERM, False),
    # The head waits in gloo for a worker that cannot reach it: deaf to SIGTERM, so the
    # clean-up must kill it.
    ("peer-wait-ctrl-c", _head_phase("distributed_init"), 3.0, signal.SIGINT, True),
    # Its KV cache is sized: the API comes next.
    ("before-ready-sigterm", _head_phase("kv_cache"), 0.0, signal.SIGTERM, False),
]


@pytest.mark.parametrize(
    ("marker", "delay", "sig", "firewalled"),
    [p[1:] for p in PHASES],
    ids=[p[0] for p in PHASES],
)
async def test_an_interrupt_at_any_phase_of_a_real_launch_leaves_no_container(
    vllm_lab: Lab,
    files: dict[str, Path],
    marker: Callable[[str], bool],
    delay: float,
    sig: int,
    firewalled: bool,
) -> None:
    with _firewall(vllm_lab) if firewalled else contextlib.nullcontext():
        proc = spark_tui(
            "launch",
            str(files["recipe"]),
            "--inventory",
            str(files["inventory"]),
            "--wait",
            "--ready-timeout",
            str(READY_TIMEOUT),
        )
        err, out = Lines(proc.stderr), Lines(proc.stdout)
        try:
            await until(
                lambda: any(marker(ln) for ln in err.lines) or proc.poll() is not None,
                MARKER_TIMEOUT,
                "the phase's line",
            )
            assert proc.poll() is None, f"the launch ended before the phase: {err.join(1)}"
            await asyncio.sleep(delay)
            proc.send_signal(sig)
            code = await asyncio.to_thread(proc.wait, 120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    stderr = err.join()
    said = stderr + "\n--- stdout:\n" + out.join()
    assert code == 128 + sig, said
    assert "Traceback" not in said
    assert "is ready" not in stderr, "interrupted before ready"
    if "as cluster" in stderr:  # the plan was made: the launch checked the nodes and says so
        assert "nothing of cluster" in stderr, said
    _no_container(vllm_lab, said)
    assert socket_dirs(proc.pid) == [], "the interrupted launch left socket folders"


# --- a rank that cannot reach the rendezvous ----------------------------------------------


def test_a_rank_that_cannot_reach_the_rendezvous_gets_a_remedy_naming_port_and_addresses(
    vllm_lab: Lab, files: dict[str, Path]
) -> None:
    """The worker's packets to the head are dropped: real vLLM's head waits in gloo for
    ever and ignores SIGTERM. The launch times out naming the rank that never came, with a
    remedy that names the rendezvous address and port, the workers' addresses and the
    firewall; it kills the deaf head, says so, and leaves no container."""
    with _firewall(vllm_lab):
        res = cli(
            "launch",
            str(files["recipe"]),
            "--inventory",
            str(files["inventory"]),
            "--wait",
            "--ready-timeout",
            str(RENDEZVOUS_READY_TIMEOUT),
            timeout=RENDEZVOUS_READY_TIMEOUT + 300,
        )
    said = res.stdout + res.stderr
    assert res.returncode == 1, said[-3000:]
    assert f"did not answer /health within {RENDEZVOUS_READY_TIMEOUT} s" in said, said[-3000:]
    assert f"rank 1 on {vllm_lab.node(2).name} never became ready" in said, said[-3000:]
    planned = re.search(r"as cluster (\w+) on", res.stderr)
    assert planned, said[-3000:]
    # The launch's own remedy is its last (a notice before it may carry one too).
    remedy = [ln for ln in res.stderr.splitlines() if ln.startswith("  remedy: ")][-1]
    head, worker = vllm_lab.node(1), vllm_lab.node(2)
    at = re.search(rf"rendezvous {re.escape(head.address)}:(\d+) on {head.name}", remedy)
    assert at, remedy
    assert f"{worker.name} ({worker.address})" in remedy, remedy
    assert "firewall" in remedy and f"TCP port {at[1]}" in remedy, remedy
    # Real vLLM's head ignored the SIGTERM of the clean-up: it was killed, and said so.
    killed = [ln for ln in res.stderr.splitlines() if "killed with SIGKILL" in ln]
    head_killed = f"rank 0 (spark-tui-{planned[1]}-r0) on {head.name} did not stop within"
    assert any(head_killed in ln for ln in killed), said[-3000:]
    assert "Traceback" not in said
    _no_container(vllm_lab, said)


# --- one ready cluster for the drills that keep it ----------------------------------------


@pytest.fixture(scope="module")
def cluster(vllm_lab: Lab, files: dict[str, Path]) -> Iterator[dict[str, Any]]:
    """`spark-tui launch RECIPE --wait` of real vLLM across both nodes (stopped at the end)."""
    _no_container(vllm_lab)
    started = time.monotonic()
    res = cli(
        "launch",
        str(files["recipe"]),
        "--inventory",
        str(files["inventory"]),
        "--wait",
        "--ready-timeout",
        str(READY_TIMEOUT),
        timeout=READY_TIMEOUT + 120,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    print(f"\nreal vLLM ready in {time.monotonic() - started:.0f} s")
    status = cli("status", "--inventory", str(files["inventory"]), "--json")
    assert status.returncode == 0, status.stderr
    (found,) = json.loads(status.stdout)["clusters"]
    info = {
        "id": found["cluster_id"],
        "containers": {r["rank"]: r["container"] for r in found["ranks"]},
        "api": f"http://{vllm_lab.node(1).address}:8000",
    }
    try:
        yield info
    finally:
        cli("stop", "--inventory", str(files["inventory"]), timeout=180)


def _running(lab: Lab) -> dict[str, list[str]]:
    out = {}
    for node in lab.nodes:
        client = docker_client(lab, node.index)
        try:
            out[node.name] = sorted(c.name for c in client.containers.list())
        finally:
            client.close()
    return out


def _keeps_running(lab: Lab, cluster: dict[str, Any]) -> None:
    """Both ranks run, and the API answers a real request (not only /health)."""
    assert _running(lab) == {
        lab.node(1).name: [cluster["containers"][0]],
        lab.node(2).name: [cluster["containers"][1]],
    }
    body = {"model": "tiny-qwen2", "prompt": "hi", "max_tokens": 2}
    reply = httpx.post(cluster["api"] + "/v1/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text


def _in_order(got: list[str], full: list[str]) -> bool:
    """Whether `got` is `full` with lines left out, but none repeated or moved."""
    it = iter(full)
    return all(any(line == other for other in it) for line in got)


async def test_logs_follow_survives_a_15s_sshd_outage_of_the_head_node(
    vllm_lab: Lab, files: dict[str, Path], cluster: dict[str, Any]
) -> None:
    """`logs --follow` of both real ranks while the head node's sshd (listener and
    sessions) is gone for 15 s: it keeps running and says the node is unreachable, then
    reachable again; every rank's followed lines are exactly its container's log (vLLM's
    access log of the requests made during the outage included, none twice); the cluster
    keeps running; SIGTERM ends the follower and its socket folders."""
    api = cluster["api"]
    follow = spark_tui(
        "logs", "--follow", "--tail", "0", "--inventory", str(files["inventory"]), raw=True
    )
    out, err = Lines(follow.stdout), Lines(follow.stderr)
    n = 0
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            for i in range(3):
                await client.get(f"{api}/v1/models?before={i}")
            await until(lambda: out.has("before=2"), 120, "the follower's first lines")
            await asyncio.to_thread(vllm_lab.stop_sshd, 1)
            assert vllm_lab.sshd_pids(1) == set(), "node 1's sshd and its sessions are gone"
            t0 = time.monotonic()
            while time.monotonic() - t0 < 15:
                await client.get(f"{api}/v1/models?during={n}")
                n += 1
                await asyncio.sleep(0.25)
            assert follow.poll() is None, "logs --follow is still running: " + err.join(1)
            await asyncio.to_thread(vllm_lab.start_sshd, 1)
            for i in range(3):
                await client.get(f"{api}/v1/models?after={i}")
        await until(lambda: out.has("after=2"), 120, "the lines after the outage")
        assert follow.poll() is None, "logs --follow is still running: " + err.join(1)
        pid = follow.pid
        assert socket_dirs(pid), "the follower forwards the Docker sockets"
        follow.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(follow.wait, 30)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
        ensure_sshd(vllm_lab, 1)
    stderr = err.join()
    assert code == 143, stderr
    assert socket_dirs(pid) == [], "SIGTERM left socket folders"
    assert "unreachable since" in stderr and "reachable again" in stderr, stderr
    assert "ended)" not in stderr, "no rank's stream ended"
    assert "Traceback" not in stderr
    lines = out.join().split("\n")
    for rank, index in ((0, 1), (1, 2)):
        prefix = f"[{rank} {vllm_lab.node(index).name}] "
        got = [ln[len(prefix) :] for ln in lines if ln.startswith(prefix)]
        full = container_log(vllm_lab, index, cluster["containers"][rank])
        assert got, f"rank {rank} was followed"
        assert got == full[: len(got)], f"rank {rank}: a line lost, repeated or out of order"
    head = [ln for ln in lines if ln.startswith("[0 ")]
    for i in range(n):
        assert sum(f"during={i} " in ln for ln in head) == 1, f"request during={i}: not once"
    _keeps_running(vllm_lab, cluster)


class Tmux:
    """A private tmux server (its own socket) running one session: a real terminal."""

    def __init__(self, name: str) -> None:
        self.name = name

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.name, *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=10,
        )

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name, check=False).stdout

    def alive(self) -> bool:
        return self.run("has-session", "-t", self.name, check=False).returncode == 0


async def _pilot_until(pilot: Any, cond: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        await pilot.pause(0.1)


def _plain(renderable: object) -> str:
    from rich.console import Console

    with open(os.devnull, "w") as sink:
        console = Console(width=400, record=True, color_system=None, file=sink)
        console.print(renderable)
        return console.export_text()


async def test_the_cockpit_killed_and_restarted_re_attaches_then_reports_a_killed_worker(
    vllm_lab: Lab, files: dict[str, Path], cluster: dict[str, Any]
) -> None:
    """The cockpit (in a real terminal) attaches to the running cluster; it is killed
    (SIGKILL: nothing of it can clean up); the cluster keeps running; a cockpit started
    again finds it and re-attaches, with the lines logged while none ran, each once, in the
    containers' order; the killed cockpit's socket folders are swept. Then the worker is
    killed: the cockpit marks rank 1 failed with its lines, says which rank and why, and
    removes the ranks: no container is left that the user was not told about."""
    import shutil

    from spark_tui.service.session import Session
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.widgets.results import ResultsBar

    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (the lab's machine has it; CI installs it)")
    inv = str(files["inventory"])
    tmux = Tmux(f"spark-drill-{os.getpid()}")
    cmd = f"exec {sys.executable} -m spark_tui --inventory {inv}"
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", "160", "-y", "48", cmd)
    pane_pid = 0
    try:
        pane_pid = int(tmux.run("display", "-p", "-t", tmux.name, "#{pane_pid}").stdout)
        deadline = time.monotonic() + 300
        screen = tmux.screen()
        while not (cluster["id"] in screen and "ready" in screen):
            assert time.monotonic() < deadline, f"the cockpit did not attach:\n{screen}"
            assert tmux.alive(), "the cockpit ended"
            await asyncio.sleep(0.5)
            screen = tmux.screen()
        assert socket_dirs(pane_pid), "the cockpit forwards the Docker sockets"
        os.kill(pane_pid, signal.SIGKILL)
        await until(lambda: not tmux.alive(), 20, "the killed cockpit's terminal to close")
    finally:
        with contextlib.suppress(ProcessLookupError):
            if pane_pid:
                os.kill(pane_pid, signal.SIGKILL)
        tmux.run("kill-server", check=False)
    # Killed, the cockpit left the cluster as it was (its user knows it runs).
    _keeps_running(vllm_lab, cluster)
    async with httpx.AsyncClient(timeout=30) as client:
        for i in range(3):
            await client.get(f"{cluster['api']}/v1/models?no-cockpit={i}")

    session = Session(vllm_lab.inventory_nodes(), reattach_hint=f"`spark-tui --inventory {inv}`")
    app = SparkApp(session, auto_refresh=False, handle_signals=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await _pilot_until(pilot, app.discovered.is_set, 120, "discovery")
        await _pilot_until(
            pilot, lambda: app.cluster is not None and app.cluster.ready, 300, "re-attached"
        )
        assert app.cluster is not None and app.cluster.cluster_id == cluster["id"]
        assert socket_dirs(pane_pid) == [], "the killed cockpit's socket folders are swept"
        head = app.panes[0]
        await _pilot_until(
            pilot, lambda: any("no-cockpit=2 " in ln for ln in head.lines), 60, "the lines"
        )
        for i in range(3):
            assert sum(f"no-cockpit={i} " in ln for ln in head.lines) == 1, i
        for rank, index in ((0, 1), (1, 2)):
            full = container_log(vllm_lab, index, cluster["containers"][rank])
            shown = app.panes[rank].lines
            assert shown and _in_order(shown, full), f"rank {rank}: lines repeated or moved"

        # The worker dies while the cockpit watches.
        client = docker_client(vllm_lab, 2)
        try:
            client.containers.get(cluster["containers"][1]).kill()
        finally:
            client.close()
        killed = time.monotonic()
        worker = app.panes[1]
        await _pilot_until(pilot, lambda: worker.state == "failed", 120, "rank 1 failed")
        print(f"\nthe cockpit marked the killed worker failed {time.monotonic() - killed:.1f} s on")
        await _pilot_until(pilot, lambda: app.cluster is None or app.cluster.failed, 120, "failed")
        assert worker.reason and "killed" in worker.reason, worker.reason
        assert worker.explaining, "the lines that explain the failure are with rank 1"
        status = _plain(app.query_one(ResultsBar).render_body())
        assert f"rank 1 on {vllm_lab.node(2).name}" in status, status
        await until(
            lambda: all(not names for names in all_containers(vllm_lab).values()),
            60,
            "the ranks removed",
        )
        assert head.state != "ready", "the head is not shown ready after its worker died"
        await pilot.press("q")
        await _pilot_until(pilot, lambda: not app.is_running, 30, "the cockpit to quit")
    _no_container(vllm_lab)
    listed = cli("status", "--inventory", inv)
    assert listed.returncode == 0 and cluster["id"] not in listed.stdout, listed.stdout

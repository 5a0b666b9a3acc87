"""Probe time for 2, 8 and 32 simulated Sparks, or 2 and 8 lab nodes (printed, never asserted).

The probe opens every node's SSH connection at once and runs every probe command of a
node at once, so the time should stay close to flat as nodes are added: the budget in
DESIGN.md is 32 nodes at most 1.5x the time of 2. The simulated nodes run in this same
process (all simulated: loopback SSH servers, no GPU), so their own work is counted too:
on real Sparks each node runs its probe commands on its own CPU, here all the simulated
nodes share this machine's cores (the Hugging Face cache scan alone starts a few dozen
processes per node). The client's own CPU time per probe is printed beside the wall time.

With `--lab` (Linux, root; under `flock /tmp/lab.lock`) it brings up a namespace lab of 8
nodes, each with a real OpenSSH sshd and a real dockerd, and probes its first 2 and all 8
nodes over real SSH: the budget is 8 lab nodes at most 1.2x the time of 2. It times apart,
never one for another: the first probe (every connection opened: key exchange, signatures,
the login shell), a probe on the open connections (what the cockpit's `r`, a launch's and
a sweep's probes do: the session keeps its connections and Docker clients), and the floors
with nothing of the probe in them: `true` in a session on the open connections, the probe's
own client connecting, running `true` and closing, and OpenSSH's `ssh NODE true`.

    python benchmarks/probe_scaling.py [--repeat 3] [--sizes 2,8,32]
    python benchmarks/probe_scaling.py --lab [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from spark_tui.remote.probe import ProbeDockers, probe_nodes, probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.sim.lab import procs
from spark_tui.sim.lab.network import NETNS_DIR
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _client_cpu() -> float:
    """This process's CPU time and its reaped children's (the OpenSSH clients)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return _cpu() + r.ru_utime + r.ru_stime


async def measure(nodes: int, repeat: int) -> tuple[float, float, float]:
    """(median, best, cpu) seconds of a full probe of `nodes` simulated nodes; cpu is
    this process's CPU time (client and simulated nodes) per probe."""
    scenario = Scenario(nodes=nodes, ssh_port=0, base_address=random_loopback_base(nodes))
    async with SimCluster(scenario) as sim:
        await probe_nodes(sim.inventory, ssh_config=None)  # warm-up: imports, key loading
        times = []
        cpu0 = _cpu()
        for _ in range(repeat):
            t0 = time.perf_counter()
            facts = await probe_nodes(sim.inventory, ssh_config=None)
            times.append(time.perf_counter() - t0)
            assert len(facts) == nodes and not any(f.errors for f in facts)
        cpu = (_cpu() - cpu0) / repeat
    return statistics.median(times), min(times), cpu


def _node_cpu(netns_ids: list[str]) -> float:
    """CPU seconds of every process in these network namespaces (sshd and what it ran,
    dockerd, containerd), each with its reaped children's: a process that ends between two
    readings moves its time into its parent's children's time, so a difference counts it."""
    total = 0.0
    for pid in procs.pids_in_namespaces(netns_ids):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICKS


async def _bare_ssh(inventory: list[Any]) -> None:
    """OpenSSH's `ssh NODE true` to every node at once: a connection's floor (key exchange,
    the login shell) with nothing of spark-tui on either side."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ControlMaster=no", "-o", "ControlPath=none"]
    children = [
        await asyncio.create_subprocess_exec(
            *argv,
            "-i",
            n.identity_file,
            "-o",
            f"UserKnownHostsFile={n.known_hosts}",
            f"{n.user}@{n.host}",
            "true",
            stdin=asyncio.subprocess.DEVNULL,
        )
        for n in inventory
    ]
    codes = [await c.wait() for c in children]
    assert codes == [0] * len(codes), codes


async def _connect_true(inventory: list[Any]) -> None:
    """The probe's own client (asyncssh) opening every node's connection at once, running
    `true` on each and closing: the part of a first probe no probe command can cut."""
    async with ConnectionPool(inventory, ssh_config=None) as pool:
        results = await asyncio.gather(*(c.run("true") for c in pool))
    assert all(r.ok for r in results)


async def _session_true(pool: ConnectionPool) -> None:
    """`true` in a new session on every open connection at once: the part of a probe on
    open connections no probe command can cut (sshd's session, the login shell)."""
    results = await asyncio.gather(*(c.run("true") for c in pool))
    assert all(r.ok for r in results)


async def _first_probe(nodes: list[Any]) -> None:
    # A fresh pool: every node's connection opened (handshakes), probed, closed: `probe`.
    facts = await probe_nodes(nodes, ssh_config=None)
    errors = [e for f in facts for e in f.errors]
    assert len(facts) == len(nodes) and not errors, errors


async def _reprobe(pool: ConnectionPool, dockers: ProbeDockers) -> None:
    # What the cockpit's `r` does (service.discover, SshNodes.probe): open() reconnects only
    # a dropped connection, then the probe runs on the session's open connections and the
    # Docker clients its probes keep.
    await pool.open(partial=True)
    facts = await probe_pool(pool, partial=True, dockers=dockers)
    errors = [e for f in facts for e in f.errors]
    assert len(facts) == len(pool) and not errors, errors


KINDS = {
    "first": "first probe (connections opened: key exchange, login)",
    "again": "probe on open connections (the cockpit's `r`)",
    "session": "`true` in a session on the open connections, all at once",
    "connect": "connect, `true`, close (asyncssh, the probe's client), all at once",
    "ssh": "bare OpenSSH `ssh NODE true`, all at once (its ssh processes' CPU counted)",
}


async def measure_lab(
    inventory: list[Any], sizes: list[int], repeat: int, netns: list[str]
) -> dict[tuple[str, int], float]:
    """Median seconds of each kind of run on the first n lab nodes, for each n in `sizes`,
    the kinds and sizes taking turns so that a busy moment of the machine is shared by all.
    Prints the runs, the client's (this process and the ssh it starts) and the nodes' CPU
    per run, and the load."""
    pools = {n: ConnectionPool(inventory[:n], ssh_config=None) for n in sizes}
    dockers = {n: ProbeDockers() for n in sizes}
    runs: dict[str, Callable[[int], Awaitable[object]]] = {
        "first": lambda n: _first_probe(inventory[:n]),
        "again": lambda n: _reprobe(pools[n], dockers[n]),
        "session": lambda n: _session_true(pools[n]),
        "connect": lambda n: _connect_true(inventory[:n]),
        "ssh": lambda n: _bare_ssh(inventory[:n]),
    }
    times: dict[tuple[str, int], list[float]] = {(k, n): [] for k in KINDS for n in sizes}
    client: dict[tuple[str, int], float] = dict.fromkeys(times, 0.0)
    node: dict[tuple[str, int], float] = dict.fromkeys(times, 0.0)
    loads = [os.getloadavg()[0]]
    try:
        for n in sizes:  # warm-up: imports, host keys, the pools' connections
            await _first_probe(inventory[:n])
            await _reprobe(pools[n], dockers[n])
        for _ in range(repeat):
            for n in sizes:
                for kind, run in runs.items():
                    c0, n0, t0 = _client_cpu(), _node_cpu(netns[:n]), time.perf_counter()
                    await run(n)
                    times[kind, n].append(time.perf_counter() - t0)
                    client[kind, n] += _client_cpu() - c0
                    # The nodes' processes of this run end a moment after it (sshd's session
                    # and connection processes): their CPU is read once they have.
                    await asyncio.sleep(0.3)
                    node[kind, n] += _node_cpu(netns[:n]) - n0
            loads.append(os.getloadavg()[0])
    finally:
        for n, pool in pools.items():
            await dockers[n].close()
            await pool.close()
    for kind, title in KINDS.items():
        print(title + ":")
        for n in sizes:
            t = times[kind, n]
            print(
                f"  {n} lab nodes: median {statistics.median(t):.3f} s  best {min(t):.3f} s  "
                f"(runs: {', '.join(f'{x:.3f}' for x in t)}); CPU a run: "
                f"client {client[kind, n] / repeat * 1000:.0f} ms, "
                f"the nodes {node[kind, n] / repeat * 1000:.0f} ms",
                flush=True,
            )
    print(f"load (1 min) during the runs: {min(loads):.1f} .. {max(loads):.1f}")
    return {key: statistics.median(t) for key, t in times.items()}


def main_lab(repeat: int) -> int:
    from spark_tui.sim.lab import Lab, LabConfig, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        print(f"lab probe benchmark skipped: {reason}")
        return 0
    cfg = LabConfig(
        nodes=8,
        prefix="labprobe",
        subnet="10.77.98.0/24",
        state_dir=Path("/var/tmp/spark-tui-labprobe"),
    )
    lab = Lab(cfg)
    t0 = time.perf_counter()
    lab.up()
    print(f"lab up (8 nodes): {time.perf_counter() - t0:.1f} s", flush=True)
    netns = [procs.netns_file_id(NETNS_DIR / n.netns) or "" for n in lab.nodes]
    try:
        results = asyncio.run(measure_lab(lab.inventory_nodes(), [2, 8], repeat, netns))
    finally:
        lab.down(quiet=True)
    for kind, title in KINDS.items():
        ratio = results[kind, 8] / results[kind, 2]
        verdict = "within" if ratio <= 1.2 else "over"
        print(f"ratio 8/2, {title}: {ratio:.2f}x ({verdict} the 1.2x budget)")
    return 0


async def main(sizes: list[int], repeat: int) -> None:
    results = {}
    for n in sizes:
        med, best, cpu = await measure(n, repeat)
        results[n] = med
        print(
            f"probe {n:>3} simulated nodes: median {med:.3f} s  best {best:.3f} s  "
            f"(cpu in this process {cpu:.3f} s, {cpu / n * 1000:.1f} ms per node)",
            flush=True,
        )
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        print(f"ratio {hi}/{lo}: {results[hi] / results[lo]:.2f}x (budget: at most 1.5x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,8,32")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lab", action="store_true", help="2 and 8 namespace lab nodes")
    args = parser.parse_args()
    if args.lab:
        raise SystemExit(main_lab(args.repeat))
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.repeat))

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
nodes over real SSH: the budget is 8 lab nodes at most 1.2x the time of 2.

    python benchmarks/probe_scaling.py [--repeat 3] [--sizes 2,8,32]
    python benchmarks/probe_scaling.py --lab [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from spark_tui.remote.probe import probe_nodes
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


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


async def measure_lab(inventory: list[Any], sizes: list[int], repeat: int) -> dict[int, float]:
    """Median seconds of a full probe of the first n lab nodes, for each n in `sizes`,
    the sizes taking turns so that a busy moment of the machine is shared by all."""
    for n in sizes:
        await probe_nodes(inventory[:n], ssh_config=None)  # warm-up: imports, host keys
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(repeat):
        for n in sizes:
            t0 = time.perf_counter()
            facts = await probe_nodes(inventory[:n], ssh_config=None)
            times[n].append(time.perf_counter() - t0)
            errors = [e for f in facts for e in f.errors]
            assert len(facts) == n and not errors, errors
    for n in sizes:
        print(
            f"probe {n:>3} lab nodes: median {statistics.median(times[n]):.3f} s  "
            f"best {min(times[n]):.3f} s  (runs: {', '.join(f'{t:.3f}' for t in times[n])})",
            flush=True,
        )
    return {n: statistics.median(times[n]) for n in sizes}


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
    try:
        results = asyncio.run(measure_lab(lab.inventory_nodes(), [2, 8], repeat))
    finally:
        lab.down(quiet=True)
    print(f"ratio 8/2: {results[8] / results[2]:.2f}x (budget: at most 1.2x)")
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

"""Probe time for 2, 8 and 32 simulated Sparks (printed, never asserted).

The probe opens every node's SSH connection at once and runs every probe command of a
node at once, so the time should stay close to flat as nodes are added: the budget in
DESIGN.md is 32 nodes at most 1.5x the time of 2. The simulated nodes run in this same
process (all simulated: loopback SSH servers, no GPU), so their own work is counted too:
on real Sparks each node runs its probe commands on its own CPU, here all the simulated
nodes share this machine's cores (the Hugging Face cache scan alone starts a few dozen
processes per node). The client's own CPU time per probe is printed beside the wall time.

    python benchmarks/probe_scaling.py [--repeat 3] [--sizes 2,8,32]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time

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
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.repeat))

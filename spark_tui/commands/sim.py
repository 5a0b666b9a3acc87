"""`spark-tui sim`: run simulated Sparks in the foreground and write their inventory."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from spark_tui.core.errors import EXIT_OK, InputError
from spark_tui.sim.nodes import Scenario, SimCluster
from spark_tui.sim.nodes.addresses import ENGINE_PORTS, address_is_free, listening_addresses
from spark_tui.sim.nodes.foreground import serve_until_signalled
from spark_tui.sim.nodes.scenario import DEFAULT_BASE_ADDRESS


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario the flags describe; bad values are input errors (exit 2)."""
    if args.nodes < 1:
        raise InputError(f"--nodes {args.nodes}: need at least one node", "pass --nodes 2")
    if args.memory_gb <= 0:
        raise InputError(f"--memory-gb {args.memory_gb} is not a size", "pass --memory-gb 128")
    if args.page_cache_gb < 0 or args.page_cache_gb >= args.memory_gb:
        raise InputError(
            f"--page-cache-gb {args.page_cache_gb} does not fit in {args.memory_gb} GB",
            "pass a page cache between 0 and the node's memory, e.g. --page-cache-gb 30",
        )
    if args.worker_dies_after is not None and args.worker_dies_after < 0:
        raise InputError("--worker-dies-after must be >= 0 seconds", "e.g. --worker-dies-after 20")
    if args.pace is not None and args.pace <= 0:
        raise InputError("--pace must be > 0", "1 is demo speed, 0.05 test speed")
    if not 0 <= args.ssh_port <= 65535:
        raise InputError(f"--ssh-port {args.ssh_port} is not a port", "pass --ssh-port 2222")
    try:
        return Scenario(
            nodes=args.nodes,
            memory_gb=args.memory_gb,
            page_cache_gb=args.page_cache_gb,
            worker_dies_after=args.worker_dies_after,
            pace=args.pace,
            base_address=args.base_address or DEFAULT_BASE_ADDRESS,
            ssh_port=args.ssh_port,
            ring=args.ring,
        )
    except ValueError as exc:
        raise InputError(
            f"invalid simulated cluster: {exc}", "pass e.g. --base-address 127.0.0.11"
        ) from None


def check_addresses_free(scenario: Scenario) -> None:
    """A --base-address range someone listens on (another demo or `spark-tui sim`) would
    start and then collide when an engine binds its port: refuse it now."""
    listening = listening_addresses()
    ports = (*ENGINE_PORTS, scenario.ssh_port) if scenario.ssh_port else ENGINE_PORTS
    taken = [
        n.address for n in scenario.all_nodes() if not address_is_free(n.address, ports, listening)
    ]
    if taken:
        raise InputError(
            f"cannot start the simulated nodes: {', '.join(taken)} already in use "
            "(something listens there, e.g. another demo or `spark-tui sim`)",
            "leave out --base-address (the first free range is taken), pass another one "
            "such as 127.0.1.11, or stop the other simulated Sparks; "
            "--ssh-port 0 picks any free SSH port",
        )


def _announce(cluster: SimCluster) -> None:
    print(cluster.describe())
    print("Running: press Ctrl+C (or send SIGTERM) to stop every simulated node.", flush=True)


def run(args: argparse.Namespace) -> int:
    scenario = scenario_from_args(args)
    if args.base_address is not None:
        check_addresses_free(scenario)
    cluster = SimCluster(
        scenario,
        state_dir=Path(args.state_dir) if args.state_dir else None,
        inventory_path=Path(args.inventory),
        free_addresses=args.base_address is None,
    )
    asyncio.run(serve_until_signalled(cluster, _announce))
    print("Stopped: every simulated node and container is gone.", flush=True)
    return EXIT_OK

"""`spark-tui demo`: simulated Sparks to try spark-tui on (the cockpit will open on them)."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from spark_tui.core.errors import EXIT_OK, InputError
from spark_tui.sim.nodes import Scenario, SimCluster
from spark_tui.sim.nodes.foreground import serve_until_signalled


def _announce(cluster: SimCluster) -> None:
    print(cluster.describe())
    print(
        "The cockpit is not part of this build yet: use the commands above against these\n"
        "simulated nodes. Press Ctrl+C to stop them.",
        flush=True,
    )


def run(args: argparse.Namespace) -> int:
    if args.nodes < 1:
        raise InputError(f"--nodes {args.nodes}: need at least one node", "pass --nodes 2")
    scenario = Scenario(nodes=args.nodes, memory_gb=args.memory_gb, ssh_port=0)
    with tempfile.TemporaryDirectory(prefix="spark-tui-demo-") as tmp:
        cluster = SimCluster(scenario, inventory_path=Path(tmp) / "inventory.yaml")
        asyncio.run(serve_until_signalled(cluster, _announce))
    print("Stopped: every simulated node and container is gone.", flush=True)
    return EXIT_OK

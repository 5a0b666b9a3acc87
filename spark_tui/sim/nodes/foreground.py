"""Run a `SimCluster` in the foreground until SIGINT/SIGTERM (for `spark-tui sim` and the
demo), turning start-up failures into `SparkError`s a user can act on."""

from __future__ import annotations

import asyncio
import errno
import signal
import sys
from collections.abc import Callable

from spark_tui.core.errors import InputError, OperationFailed
from spark_tui.sim.nodes.cluster import SimCluster


async def serve_until_signalled(
    cluster: SimCluster, announce: Callable[[SimCluster], None] | None = None
) -> None:
    """Start `cluster`, call `announce`, wait for SIGINT or SIGTERM, stop everything."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        try:
            await cluster.start()
        except OSError as exc:
            raise start_error(cluster, exc) from None
        try:
            if announce is not None:
                announce(cluster)
            sys.stdout.flush()
            await stop.wait()
        finally:
            await cluster.close()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def start_error(cluster: SimCluster, exc: OSError) -> InputError | OperationFailed:
    """What to tell a user whose simulated nodes could not start."""
    s = cluster.scenario
    where = f"{s.base_address} (+{s.nodes - 1} more) port {s.ssh_port}"
    if exc.errno == errno.EADDRINUSE:
        return InputError(
            f"cannot start the simulated nodes: {where} is already in use",
            "stop the other `spark-tui sim` or demo, leave out --base-address (the first "
            "free range is taken), or pass --ssh-port 0 (any free port)",
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return InputError(
            f"cannot start the simulated nodes: {s.base_address} is not a local address here",
            "on Linux every 127.x.y.z works; elsewhere add loopback aliases "
            "(macOS: sudo ifconfig lo0 alias 127.0.0.11 up, one per node)",
        )
    return OperationFailed(
        f"cannot start the simulated nodes: {exc}",
        "check the --state-dir is writable and the addresses are free, then retry",
    )

"""A simulated node of the demo that does not answer gets a remedy for a simulated node."""

from __future__ import annotations

import socket

from spark_tui.sim.nodes.remedies import UNREACHABLE_IN_DEMO
from spark_tui.ui.remote_backend import DemoBackend


async def never_asked(host: str, fingerprint: str) -> bool:
    raise AssertionError(f"the demo's host keys are known: asked about {host}")


async def test_a_silent_simulated_node_is_not_to_be_pinged() -> None:
    backend = DemoBackend(pace=0.05, token_scale=0.05)
    await backend.start()
    holder = socket.socket()
    try:
        worker = backend.cluster.nodes[1]
        await backend.cluster.call(worker.close())
        # Its port accepts connections and never says a word: the client's login timeout.
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind((worker.address, worker.port))
        holder.listen()
        head, silent = await backend.discover(never_asked)
        assert head.facts is not None and head.error is None
        assert silent.facts is None
        assert silent.error and "no answer within" in silent.error
        assert silent.remedy == UNREACHABLE_IN_DEMO
        assert "ping it" not in silent.remedy and "powered on and" not in silent.remedy
        assert "simulated Spark" in silent.remedy and "spark-tui demo" in silent.remedy
    finally:
        holder.close()
        await backend.close()

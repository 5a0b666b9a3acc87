"""A simulated node of the demo that does not answer gets a remedy for a simulated node."""

from __future__ import annotations

import socket

from spark_tui.service import events as ev
from spark_tui.sim.nodes.remedies import UNREACHABLE_IN_DEMO
from spark_tui.ui.demo_session import DemoSession


async def test_a_silent_simulated_node_is_not_to_be_pinged() -> None:
    session = DemoSession(pace=0.05, token_scale=0.05)
    await session.start()
    holder = socket.socket()
    try:
        worker = session.sim.nodes[1]
        await session.sim.call(worker.close())
        # Its port accepts connections and never says a word: the client's login timeout.
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind((worker.address, worker.port))
        holder.listen()
        seen = []
        async for event in session.discover():
            assert not isinstance(event, ev.Question), "the demo's host keys are known"
            seen.append(event)
        probed = [e for e in seen if isinstance(e, ev.Probed)][-1]
        head, silent = session.inventory[0].name, session.inventory[1].name
        assert head not in probed.errors
        message, remedy = probed.errors[silent]
        assert "no answer within" in message
        assert remedy == UNREACHABLE_IN_DEMO
        assert "ping it" not in remedy and "powered on and" not in remedy
        assert "simulated Spark" in remedy and "spark-tui demo" in remedy
    finally:
        holder.close()
        await session.close()

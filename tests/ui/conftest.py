"""The cockpit tests' own setup: a test ends the simulated Sparks it started."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

from spark_tui.ui.demo_session import SimulatedNodes


@pytest.fixture(autouse=True)
def simulated_sparks_end_with_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail a test that leaves the demo's simulated Sparks running (its session never
    closed, as `run_cockpit` closes it): their SSH connections and tasks, and the cockpit's
    to them, would be closed by the garbage collector once the test's event loop is gone
    ("Event loop is closed", reported against whichever test runs then)."""
    started: list[SimulatedNodes] = []
    start = SimulatedNodes.start

    async def start_and_remember(self: SimulatedNodes) -> None:
        started.append(self)
        await start(self)

    monkeypatch.setattr(SimulatedNodes, "start", start_and_remember)
    yield
    left = [nodes for nodes in started if nodes.sim is not None]
    for nodes in left:  # not left running for the tests after it either
        with contextlib.suppress(Exception):
            asyncio.run(nodes.sim.close())
    assert not left, (
        "the test left its simulated Sparks running: close its session when the cockpit "
        "ends (cockpit_helpers.cockpit does)"
    )

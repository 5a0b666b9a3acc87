"""`spark-tui demo --ring`: the cockpit on three simulated Sparks cabled as a ring (real SSH,
simulated nodes): the nodes panel names the ring, and the demo refuses a ring of two."""

from __future__ import annotations

import pytest
from cockpit_helpers import cockpit, static_text, wait_until

from spark_tui.commands.demo import check_layout
from spark_tui.core.errors import InputError
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession


async def test_demo_on_a_ring_of_three_shows_the_ring() -> None:
    backend = DemoSession(
        nodes=3, pace=0.05, token_scale=0.05, base_address=random_loopback_base(3), ring=True
    )
    app = SparkApp(backend, auto_refresh=False, handle_signals=False)
    async with cockpit(app, (160, 48)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        nodes = static_text(app, "#nodes")
        assert "ring of 3" in nodes, nodes


def test_a_ring_needs_three_sparks() -> None:
    with pytest.raises(InputError) as err:
        check_layout(2, ring=True)
    assert "--nodes 3" in err.value.remedy
    check_layout(3, ring=True)
    check_layout(2, ring=False)

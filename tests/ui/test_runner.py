"""The cockpit's runner closes the session however the app ends: after a crash too."""

from __future__ import annotations

import socket
import time

from cockpit_helpers import SLACK, live_children

from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession
from spark_tui.ui.runner import run_cockpit


class CrashesOnceDiscovered(SparkApp):
    """The cockpit, crashing (an exception Textual catches) once the nodes answered."""

    def on_mount(self) -> None:
        self.seen: list[tuple[str, int]] = []
        self.set_interval(0.1, self.crash_when_discovered)

    def crash_when_discovered(self) -> None:
        session = self.session
        assert isinstance(session, DemoSession)
        if self.discovered.is_set() and session.sim is not None:
            self.seen = [(n.address, n.port) for n in session.sim.nodes]
            raise RuntimeError("a crash in the cockpit")


def listening(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((address, port)) == 0


def test_a_crash_of_the_app_stops_the_simulated_sparks() -> None:
    before = live_children()
    session = DemoSession(pace=0.05, token_scale=0.05, base_address=random_loopback_base())
    app = CrashesOnceDiscovered(session, auto_refresh=False, handle_signals=False)
    code = run_cockpit(app, headless=True)
    assert code != 0  # Textual ended the app on the exception
    assert app.seen, "the app crashed before the simulated Sparks answered"
    assert session.sim is None
    assert not [node for node in app.seen if listening(*node)]
    deadline = time.monotonic() + 10 * SLACK
    while live_children() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not live_children() - before

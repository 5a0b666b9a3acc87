"""The cockpit on a replayed session, discovered and launched: how most Pilot tests start."""

from __future__ import annotations

from typing import Any

from cockpit_helpers import settle, wait_until
from cockpit_replay import ReplaySession
from textual.pilot import Pilot

from spark_tui.ui.app import SparkApp

RECIPE = "glm-5.3-flash"


def replay_app(session: ReplaySession | None = None, **kw: Any) -> SparkApp:
    """The cockpit on `session` (a fresh replay by default), with no automatic refresh and
    no signal handlers of its own (the test drives it)."""
    kw.setdefault("recipe", RECIPE)
    return SparkApp(session or ReplaySession(), auto_refresh=False, handle_signals=False, **kw)


async def discovered(pilot: Pilot[Any]) -> None:
    """Wait until the cockpit's first discovery has ended."""
    app = pilot.app
    assert isinstance(app, SparkApp)
    await wait_until(pilot, app.discovered.is_set, 10, "discovery")
    await pilot.pause(0.05)


async def launched_ready(pilot: Pilot[Any]) -> None:
    """Discover, press the launch key and wait until the cluster is ready."""
    await discovered(pilot)
    await pilot.press("l")
    app = pilot.app
    assert isinstance(app, SparkApp)
    await wait_until(pilot, lambda: bool(app.cluster and app.cluster.ready), 10, "ready")
    await settle(pilot)

"""The cockpit loads the launch's code once the nodes are discovered (while the user picks
a recipe), so that its launch key starts containers rather than imports."""

from __future__ import annotations

import pytest
from cockpit_helpers import wait_until
from cockpit_replay import ReplaySession

from spark_tui.service.session import Session
from spark_tui.ui.app import SparkApp


async def test_the_launch_code_is_loaded_after_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    app = SparkApp(
        ReplaySession(), recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False
    )

    async def load_launch(session: Session) -> None:
        calls.append(app.discovered.is_set())

    monkeypatch.setattr(ReplaySession, "load_launch", load_launch)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 10, "discovery")
        await wait_until(pilot, lambda: bool(calls), 10, "the launch's code loaded")
    assert calls == [True], "loaded once, after the nodes were discovered"

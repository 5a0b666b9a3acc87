"""A change from the cockpit's edit dialog never leaves the user without their service by
surprise, on the demo's simulated Sparks: a relaunch that fails at runtime (the head's API
port taken by another program) asks, then brings back the settings it replaced; Esc while a
tune relaunches asks, then does the same."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from cockpit_helpers import cockpit, plain, wait_until

from spark_tui.ops.bench import BenchConfig
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession
from spark_tui.ui.screens.dialogs import Dialog
from spark_tui.ui.screens.edit import EditSettingDialog

QUICK = BenchConfig(concurrency=(2,), prompt_tokens=16, output_tokens=8, requests_per_level=4)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(data))
    return data


def dialog_text(app: SparkApp) -> str:
    screen = app.screen
    assert isinstance(screen, Dialog), type(screen)
    return f"{screen.title_text} {plain(screen.body)}"


async def change(pilot, app: SparkApp, key: str, value: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("e")
    await wait_until(pilot, lambda: isinstance(app.screen, EditSettingDialog), 10, "the editor")
    await pilot.press(*key, "enter", *value, "enter")
    await wait_until(pilot, lambda: app.busy == "tuning", 10, "the tune")


async def test_a_failed_relaunch_and_an_ended_one_bring_the_settings_back() -> None:
    base = random_loopback_base()
    # Slow enough that a relaunch is still loading when Esc is pressed (about 6 s).
    backend = DemoSession(pace=0.3, token_scale=0.05, base_address=base, bench_config=QUICK)
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    async with cockpit(app, (120, 40)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        await pilot.press("l")
        await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 60, "ready")
        first = app.cluster
        assert first is not None

        with socket.socket() as taken:
            taken.bind((base, 0))  # node 1, the head: its API port is taken
            taken.listen()
            port = taken.getsockname()[1]
            await change(pilot, app, "port", str(port))
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, Dialog) and "relaunch failed" in dialog_text(app),
                120,
                "the question after the failed relaunch",
            )
        assert "Address already in use" in dialog_text(app) or "exited" in dialog_text(app)
        await pilot.press("enter")  # the question's default (yes), as at the terminal
        await wait_until(pilot, lambda: app.busy is None, 120, "the settings back")
        await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 60, "ready again")
        assert app.cluster is not None and app.cluster.cluster_id == first.cluster_id
        assert "port" not in app.cluster.overrides
        said = " ".join(str(n.message) for n in app._notifications)
        assert "the settings it ran with before run again" in said, said
        assert "port" not in app.main.sets.get("glm-5.3-flash", {}), "the change is not kept"

        await change(pilot, app, "max_num_seqs", "8")
        await wait_until(
            pilot, lambda: app.main.tune_replaced is not None, 120, "the running cluster stopped"
        )
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, Dialog), 10, "the question")
        assert "stopped to relaunch it with max_num_seqs=8" in dialog_text(app)
        await pilot.press("y")
        await wait_until(
            pilot,
            lambda: app.busy is None and app.cluster is not None and app.cluster.ready,
            120,
            "the settings back after Esc",
        )
        assert app.cluster is not None and "max_num_seqs" not in app.cluster.overrides
        assert app.main.last_compared is None, "the change was not measured"
        running = [c for c in await backend.nodes.status() if c.running]
        assert [c.cluster_id for c in running] == [first.cluster_id]
        await app.main.stop_now()

"""The cockpit on a recorded demo launch (ReplaySession): quitting, host keys, keys, themes,
errors shown with their remedy."""

from __future__ import annotations

import gc
import os
import warnings
from pathlib import Path

import pytest
from cockpit_helpers import plain, results_text, static_text, wait_until
from cockpit_replay import ReplaySession
from replay_app import discovered, launched_ready, replay_app
from textual.widgets import Button

from spark_tui.core.errors import SparkError
from spark_tui.ui.config import CockpitConfig
from spark_tui.ui.screens.dialogs import Dialog, HostKeyDialog, QuitDialog
from spark_tui.ui.screens.info import HelpScreen, HistoryScreen
from spark_tui.ui.screens.main import MainScreen

SIZE = (160, 48)


async def test_quit_with_a_real_cluster_asks_and_can_leave_it_running() -> None:
    backend = ReplaySession(simulated=False)
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        await pilot.press("q")
        await pilot.pause(0.05)
        assert isinstance(app.screen, QuitDialog)
        assert "re-attaches" in plain(app.screen.query(".body").first().content)
        await pilot.press("c")
        await pilot.pause(0.05)
        assert app.is_running and not isinstance(app.screen, QuitDialog)
        await pilot.press("q")
        await pilot.press("l")
        await wait_until(pilot, lambda: not app.is_running, 5, "exit")
    assert backend.nodes.stopped == [] and backend.nodes.closed
    assert app.return_value == 0


async def test_quit_with_a_real_cluster_can_stop_it() -> None:
    backend = ReplaySession(simulated=False)
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        await pilot.press("q", "s")
        await wait_until(pilot, lambda: not app.is_running, 5, "exit")
    assert len(backend.nodes.stopped) == 1 and backend.nodes.closed


async def test_quitting_the_demo_stops_its_cluster() -> None:
    backend = ReplaySession(simulated=True)
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        await pilot.press("q")
        await pilot.pause(0.05)
        assert isinstance(app.screen, Dialog) and "simulated Sparks" in plain(app.screen.body)
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.is_running, 5, "exit")
    assert len(backend.nodes.stopped) == 1 and backend.nodes.closed


async def test_terminal_gone_stops_the_demo_cluster_and_exits() -> None:
    backend = ReplaySession(simulated=True)
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        app.terminal_gone("SIGHUP")
        await wait_until(pilot, lambda: not app.is_running, 5, "exit")
    assert len(backend.nodes.stopped) == 1 and backend.nodes.closed


async def test_terminal_gone_leaves_a_real_cluster_running() -> None:
    backend = ReplaySession(simulated=False)
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        app.terminal_gone("stdin closed")
        await wait_until(pilot, lambda: not app.is_running, 5, "exit")
    assert backend.nodes.stopped == [] and backend.nodes.closed


async def test_host_key_is_confirmed_in_a_modal_with_its_fingerprint() -> None:
    backend = ReplaySession(host_key=("[127.0.0.11]:2222", "SHA256:Zm9vYmFyYmF6cXV4"))
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, HostKeyDialog), 5, "host key")
        await pilot.pause(0.05)
        body = plain(app.screen.body)
        assert "SHA256:Zm9vYmFyYmF6cXV4" in body and "[127.0.0.11]:2222" in body
        assert app.focused is app.screen.query_one("#no", Button)  # Enter does not trust
        await pilot.press("y")
        await discovered(pilot)
        assert backend.nodes.host_key_answer is True and len(app.nodes) == 2


async def test_refusing_a_host_key_leaves_that_node_unreachable_with_the_reason() -> None:
    backend = ReplaySession(host_key=("[127.0.0.11]:2222", "SHA256:Zm9vYmFy"))
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, HostKeyDialog), 5, "host key")
        await pilot.press("escape")
        await discovered(pilot)
        assert backend.nodes.host_key_answer is False and len(app.nodes) == 1
        assert "host key refused" in static_text(app, "#nodes")


async def test_keys_remapped_from_the_config_file() -> None:
    backend = ReplaySession()
    app = replay_app(backend, config=CockpitConfig(keys={"launch": "f5", "nonsense": "x"}))
    async with app.run_test(size=SIZE) as pilot:
        # the unknown binding id is warned about as the cockpit starts (a toast that expires)
        await wait_until(
            pilot,
            lambda: any("nonsense" in str(n.message) for n in app._notifications),
            5,
            "the keymap warning",
        )
        await discovered(pilot)
        await pilot.press("l")
        await pilot.pause(0.1)
        assert not any(c.startswith("launch") for c in backend.nodes.calls)
        await pilot.press("f5")
        await wait_until(
            pilot, lambda: any(c.startswith("launch") for c in backend.nodes.calls), 5, "f5"
        )
        await pilot.press("question_mark")
        await pilot.pause(0.05)
        assert isinstance(app.screen, HelpScreen)
        rows = dict(app.screen.rows)
        assert rows.get("f5") == "launch" and rows.get("/") == "filter" and rows.get("?") == "help"


def write_user_theme(name: str) -> Path:
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui" / "themes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\ndark: true\nprimary: '#FF00FF'\n")
    return path


async def test_themes_bundled_user_flag_and_palette() -> None:
    write_user_theme("my-magenta")
    app = replay_app(theme="spark-light")
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        assert app.theme == "spark-light"
        for name in ("spark-dark", "spark-light", "spark-ansi", "my-magenta"):
            assert name in app.available_themes
            app.theme = name  # every theme must render the whole screen
            await pilot.pause(0.05)
            assert app.theme == name
        app.theme = "spark-light"
        # the command palette switches themes and runs every action
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"Theme: my-magenta")
        await pilot.pause(0.4)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.theme == "my-magenta", 5, "user theme from palette")
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"Theme: spark-ansi")
        await pilot.pause(0.4)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.theme == "spark-ansi", 5, "palette theme switch")
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"Show the run history")
        await pilot.pause(0.4)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen), 5, "palette action")


async def test_no_color_uses_the_ansi_theme_and_unknown_theme_warns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        assert app.theme == "spark-ansi"
    monkeypatch.delenv("NO_COLOR")
    app = replay_app(theme="no-such-theme")
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        assert app.theme == "spark-dark"
        assert any("no-such-theme" in str(n.message) for n in app._notifications)


async def test_errors_in_workers_are_shown_with_a_remedy_never_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_CRASH_LOG", str(tmp_path / "crash.log"))
    backend = ReplaySession()
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)

        async def broken_smoke(*_a: object) -> list[object]:
            raise SparkError("the API did not answer", "check the head node's container")

        backend.nodes.smoke_checks = broken_smoke  # type: ignore[method-assign]
        await pilot.press("t")
        await wait_until(pilot, lambda: "did not answer" in results_text(app), 5, "error shown")
        assert "check the head node's container" in results_text(app)

        def buggy_bench(*_a: object) -> object:
            raise RuntimeError("boom")

        backend.nodes.bench_run = buggy_bench  # type: ignore[method-assign]
        await pilot.press("b")
        await pilot.press("enter")  # the bench dialog: run with its settings
        await wait_until(pilot, lambda: "unexpected error" in results_text(app), 5, "bug shown")
        assert "RuntimeError: boom" in results_text(app) and "crash.log" in results_text(app)
        assert "Traceback" in (tmp_path / "crash.log").read_text()
        assert app.is_running and app.busy is None


async def test_help_and_history_open_and_close_with_escape() -> None:
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.05)
        assert isinstance(app.screen, HelpScreen)
        rows = dict(app.screen.rows)
        for key in ("l", "s", "t", "b", "e", "h", "/", "?", "q", "f", "esc"):
            assert key in rows, key
        await pilot.press("escape")
        await pilot.press("h")
        await pilot.pause(0.05)
        assert isinstance(app.screen, HistoryScreen) and app.screen.runs == []
        await pilot.press("escape")
        await pilot.pause(0.05)
        assert not isinstance(app.screen, HistoryScreen | HelpScreen)


def test_a_worker_the_app_never_starts_leaves_no_coroutine_unawaited() -> None:
    # The app may drop a screen's worker without starting it (it is closing): the screen
    # hands it the method, not a coroutine that nobody would await.
    dropped: list[object] = []

    class ClosingApp:  # TEST DOUBLE: an app that takes a worker and never starts it
        def run_worker(self, work: object, **_kw: object) -> None:
            dropped.append(work)

    class Screen:
        app = ClosingApp()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        MainScreen.prepare_verdicts(Screen(), retry=True)  # type: ignore[arg-type]
        assert len(dropped) == 1
        dropped.clear()
        gc.collect()
    assert [str(w.message) for w in seen if "never awaited" in str(w.message)] == []

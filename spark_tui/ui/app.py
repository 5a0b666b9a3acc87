"""The cockpit's App: themes, keys, signals and the quit flow's workers around the main
screen (spark_tui.ui.screens.main); spark_tui.ui.quitting asks before quitting and keeps
the crash log."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import App
from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from spark_tui.core.errors import SparkError
from spark_tui.ui.config import CockpitConfig
from spark_tui.ui.screens.main import MainScreen
from spark_tui.ui.themes import DEFAULT_THEME, NO_COLOR_THEME, load_themes

if TYPE_CHECKING:
    from textual.command import Provider
    from textual.driver import Driver

    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.recipe import Recipe
    from spark_tui.core.sweep_result import SweepResult
    from spark_tui.service import events as ev
    from spark_tui.service.session import Cluster, Session
    from spark_tui.ui.widgets.logpane import LogPane


# Below these sizes the layout gets compact (80x24 over SSH is the smallest we design for).
SHORT_HEIGHT = 34
NARROW_WIDTH = 120
# How long quitting waits for the cluster to stop when the terminal went away, and how
# long the app may then take to end before the process ends itself.
GONE_STOP_TIMEOUT = 20.0
GONE_EXIT_DEADLINE = 5.0


def _cockpit_commands() -> type[Provider]:
    """The palette's cockpit entries, loaded when the palette first opens (not for the
    first frame)."""
    from spark_tui.ui.palette import CockpitCommands

    return CockpitCommands


class SparkApp(App[int]):
    """The spark-tui cockpit."""

    TITLE = "spark-tui"
    COMMANDS = App.COMMANDS | {_cockpit_commands}
    CSS = """
    Screen { layout: vertical; overflow: hidden; }
    #title { height: 1; padding: 0 1; background: $panel; color: $text; }
    #title.simulated { background: $accent 30%; }
    #top { height: 11; }
    #top > NodePanel { width: 1fr; }
    #top > RecipePanel { width: 1fr; }
    #top > FitPanel { width: 1fr; }
    .-short GaugesPanel { max-height: 2; border-top: none; background: $panel 40%; }
    .-short GaugesPanel.-alert { max-height: 7; }
    #logs { height: 1fr; min-height: 5; }
    #logs > Horizontal { height: 1fr; }
    #logs TabbedContent { height: 1fr; }
    #logs TabPane { padding: 0; }
    #filter { dock: bottom; display: none; height: 1; margin-bottom: 1; }
    #filter.visible { display: block; }
    #filter.-invalid { color: $error; }
    /* 80x24 and other short terminals: every row counts. */
    .-short #top { height: 8; }
    .-short RecipePanel > #recipe-details { max-height: 2; border-top: none; }
    .-short ResultsBar { max-height: 5; border-top: none; background: $panel 40%; }
    .-short LogPane { border: none; margin-right: 1; }
    .-short LogPane:focus-within > .pane-head { background: $primary 40%; }
    """
    BINDINGS = [  # noqa: RUF012
        Binding("l", "launch", "launch", id="launch"),
        Binding("s", "stop", "stop", id="stop"),
        Binding("t", "smoke", "smoke", id="smoke"),
        Binding("b", "bench", "bench", id="bench"),
        Binding("e", "edit", "edit", id="edit"),
        Binding("h", "history", "history", id="history"),
        Binding("v", "results", "results in full", id="results", show=False),
        Binding("m", "sync", "sync model+image", id="sync", show=False),
        Binding("slash", "filter", "filter", id="filter"),
        Binding("f", "fullscreen", "full screen log", id="fullscreen", show=False),
        Binding("c", "compact", "compact/full log lines", id="compact", show=False),
        Binding("r", "refresh", "refresh nodes", id="refresh", show=False),
        Binding("y", "copy_tunnel", "copy the API's tunnel command", id="copy_tunnel", show=False),
        Binding(
            "k", "keep_failed", "when a rank fails: keep or stop them", id="keep_failed", show=False
        ),
        Binding("w", "sweep_result", "the last sweep's table and chart", id="sweep", show=False),
        Binding(
            "n",
            "next_cluster",
            "next of our clusters (the keys act on it)",
            id="next_cluster",
            show=False,
        ),
        Binding("question_mark", "help", "help", id="help"),
        Binding("escape", "back", "back", id="back", show=False),
        Binding("q", "quit_cockpit", "quit", id="quit"),
    ]

    def __init__(
        self,
        session: Session,
        *,
        recipe: str | None = None,
        theme: str | None = None,
        config: CockpitConfig | None = None,
        auto_refresh: bool = True,
        handle_signals: bool = True,
        watch_interval: float | None = None,
        keep_failed: bool = False,
        driver_class: type[Driver] | None = None,
    ) -> None:
        # `driver_class`: another way to the screen than a terminal (the web demo's browser).
        driver = driver_class
        if driver is None and sys.platform != "win32":
            from spark_tui.ui.driver import CockpitDriver

            driver = CockpitDriver
        super().__init__(driver_class=driver)
        self.session = session
        self.config = config or CockpitConfig()
        self.requested_theme = theme or self.config.theme
        self.handle_signals = handle_signals
        self._screen_args: dict[str, Any] = {
            "recipe": recipe,
            "auto_refresh": auto_refresh,
            "keep_failed": keep_failed or self.config.keep_failed,
        }
        if watch_interval is not None:
            self._screen_args["watch_interval"] = watch_interval
        self.main: MainScreen  # made with the first screen, once the App runs
        self.closing = False
        self._signals: list[int] = []
        # The theme is chosen before the App runs: chosen on mount, it would make Textual
        # parse every stylesheet a second time, with the theme's colours, before the first
        # frame.
        self._theme_variables: dict[str, str] | None = None
        self._theme_problems = self._choose_theme()

    def get_default_screen(self) -> Screen[Any]:
        self.main = MainScreen(self.session, **self._screen_args)
        return self.main

    def _choose_theme(self) -> list[str]:
        """Register the themes found and take the one asked for; the problems met."""
        themes, problems = load_themes()
        for theme in themes:
            self.register_theme(theme)
        self.theme_names = [t.name for t in themes]
        wanted = self.requested_theme or (
            NO_COLOR_THEME if os.environ.get("NO_COLOR") else DEFAULT_THEME
        )
        names = {t.name for t in themes} | set(self.available_themes)
        if wanted not in names:
            problems.append(f"unknown theme {wanted!r}; known: {', '.join(sorted(names))}")
            wanted = DEFAULT_THEME
        self.theme = wanted
        # The stylesheet was made with Textual's default theme: it takes this one's colours
        # now, before its first parse (see refresh_css).
        self._theme_variables = self.get_css_variables()
        self.stylesheet.set_variables(self._theme_variables)
        return problems

    def refresh_css(self, animate: bool = True) -> None:
        # Textual's theme watcher queued a refresh when __init__ chose the theme. The
        # stylesheet had that theme's colours before it was first parsed, so that refresh
        # would only parse every stylesheet again (a sixth of the first frame's time);
        # any later one (another theme, other colours) runs.
        chosen, self._theme_variables = self._theme_variables, None
        if chosen is not None and chosen == self.get_css_variables():
            return
        super().refresh_css(animate)

    async def on_mount(self) -> None:
        problems = self._theme_problems
        if self.config.keys:
            self._apply_keymap(self.config.keys, problems)
        for problem in problems:
            self.notify(problem, severity="warning", timeout=8)
        self._install_signal_handlers()

    def _apply_keymap(self, keys: dict[str, str], problems: list[str]) -> None:
        known = {b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id}
        unknown = sorted(set(keys) - known)
        if unknown:
            problems.append(
                f"config keys: unknown binding ids {unknown}; known: {', '.join(sorted(known))}"
            )
        self.set_keymap({k: v for k, v in keys.items() if k in known})

    def on_resize(self, event: Resize) -> None:
        short, narrow = event.size.height < SHORT_HEIGHT, event.size.width < NARROW_WIDTH
        self.set_class(short, "-short")
        self.set_class(narrow, "-narrow")
        with contextlib.suppress(Exception):
            footer = self.query_one(Footer)
            footer.compact = narrow
            footer.show_command_palette = not narrow

    # ------------------------------------------------------- errors & signals
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker's error is shown with its remedy; nothing reaches the screen as a trace."""
        if event.state is not WorkerState.ERROR:
            return
        exc = event.worker.error
        if isinstance(exc, SparkError):
            self.main.show_error(exc.message, exc.remedy)
            return
        from spark_tui.ui.quitting import write_crash_log

        where = write_crash_log(exc)
        self.main.show_error(
            f"unexpected error in {event.worker.name or 'a task'}: {type(exc).__name__}: {exc}",
            f"the details are in {where}; please report it. The cockpit keeps running: "
            "try the action again, or quit (q)",
        )

    def _install_signal_handlers(self) -> None:
        if not self.handle_signals or sys.platform == "win32":
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.terminal_gone, sig.name)
                self._signals.append(sig)
            except (RuntimeError, ValueError, NotImplementedError):
                pass  # not the main thread (tests): nothing to install

    def _remove_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        self._signals.clear()

    def terminal_gone(self, why: str = "SIGHUP") -> None:
        """The terminal went away (SIGHUP, stdin EOF) or we were told to stop (SIGTERM):
        end without asking. The demo's cluster is stopped; a real one is left running."""
        if self.closing:
            return
        self.closing = True
        if why != "SIGTERM" and self.handle_signals:
            from spark_tui.ui.quitting import detach_from_terminal

            detach_from_terminal()
            driver = self._driver
            if driver is not None:
                # Restoring the terminal's modes on exit writes to it: nowhere to write now.
                driver.write = lambda _data: None  # type: ignore[method-assign]
        self._gone(why)

    @work(group="exit", exit_on_error=False)
    async def _gone(self, why: str) -> None:
        # A real cluster is left running, even one still loading.
        self.session.keep_on_cancel = not self.session.simulated
        try:
            if self.cluster is not None and self.cluster.running and self.session.simulated:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.main.stop_now(), GONE_STOP_TIMEOUT)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.session.close(), GONE_STOP_TIMEOUT)
            if self.handle_signals:
                # Everything is cleaned up; should restoring a dead terminal hang, end anyway.
                timer = threading.Timer(GONE_EXIT_DEADLINE, os._exit, (0,))
                timer.daemon = True
                timer.start()
            self.exit(0)

    async def on_unmount(self) -> None:
        self._remove_signal_handlers()

    # -------------------------------------------------- the main screen's state
    # Read by the tests and the screenshot script as `app.<name>`; the screen holds them.
    @property
    def cluster(self) -> Cluster | None:
        """The cluster the session launched or attached to."""
        return self.session.cluster

    @property
    def nodes(self) -> list[NodeFacts]:
        return self.main.nodes

    @property
    def selected(self) -> Recipe | None:
        return self.main.selected

    @property
    def recipes(self) -> list[Recipe]:
        return self.main.recipes

    @property
    def sets(self) -> dict[str, dict[str, str]]:
        return self.main.sets

    @property
    def panes(self) -> dict[int, LogPane]:
        return self.main.panes

    @property
    def busy(self) -> str | None:
        return self.main.busy

    @property
    def discovered(self) -> asyncio.Event:
        return self.main.discovered

    @property
    def last_smoke(self) -> list[dict[str, Any]] | None:
        return self.main.last_smoke

    @property
    def last_bench(self) -> ev.BenchDone | None:
        return self.main.last_bench

    @property
    def last_compare(self) -> Text | None:
        return self.main.last_compare

    @property
    def last_sweep(self) -> SweepResult | None:
        return self.main.last_sweep

    @property
    def last_compared(self) -> ev.Compared | None:
        return self.main.last_compared

    def _show_probes(self, probed: ev.Probed) -> None:
        self.main.route(probed)

    def refresh_recipes(self, keep: str | None = None) -> None:
        self.main.refresh_recipes(keep=keep)

    def build_panes(self, ranks: list[tuple[int, str]]) -> None:
        self.main.build_panes(ranks)

    def _rank_state(self, event: ev.RankStateChanged) -> None:
        self.main.route(event)

    # ------------------------------------------------------------------- keys
    # The bindings (and the palette's entries) live on the App, so they work over any
    # dialog as before; each runs the main screen's action.
    def action_launch(self) -> None:
        self.main.action_launch()

    def action_stop(self) -> None:
        self.main.action_stop()

    def action_smoke(self) -> None:
        self.main.action_smoke()

    def action_bench(self) -> None:
        self.main.action_bench()

    def action_edit(self) -> None:
        self.main.action_edit()

    def action_history(self) -> None:
        self.main.action_history()

    def action_sweep_result(self) -> None:
        self.main.action_sweep_result()

    def action_results(self) -> None:
        self.main.action_results()

    def action_sync(self) -> None:
        self.main.action_sync()

    def action_reset_baseline(self) -> None:
        self.main.action_reset_baseline()

    def action_refresh(self) -> None:
        self.main.action_refresh()

    def action_copy_tunnel(self) -> None:
        self.main.action_copy_tunnel()

    def action_keep_failed(self) -> None:
        self.main.action_keep_failed()

    def action_next_cluster(self) -> None:
        self.main.action_next_cluster()

    def action_filter(self) -> None:
        self.main.action_filter()

    def action_back(self) -> None:
        self.main.action_back()

    def action_fullscreen(self) -> None:
        self.main.action_fullscreen()

    def action_compact(self) -> None:
        self.main.action_compact()

    def action_help(self) -> None:
        self.main.action_help()

    def key_of(self, binding_id: str, fallback: str) -> str:
        """The key that runs a binding now (the config file may have remapped it)."""
        remapped = self._keymap.get(binding_id)
        if remapped:
            key = remapped.split(",")[0].strip()
            return self.get_key_display(Binding(key, "", ""))
        for key, bindings in self._bindings.key_to_bindings.items():
            for binding in bindings:
                if binding.id == binding_id:
                    return self.get_key_display(binding.with_key(key))
        return fallback

    # ------------------------------------------------------------------ quit
    async def action_quit(self) -> None:
        """Textual's own quit (the palette's Quit, ctrl+q) asks like q does."""
        self.action_quit_cockpit()

    def action_quit_cockpit(self) -> None:
        from spark_tui.ui.quitting import ask_to_quit

        ask_to_quit(self)

    @work(exclusive=True, group="stop", exit_on_error=False)
    async def stop_and_exit(self) -> None:
        """Stop the cluster, then end (the cockpit stays if the stop failed)."""
        self.closing = True
        if await self.main.stop_now():
            self.exit_clean()
        else:
            self.closing = False

    @work(group="exit", exit_on_error=False)
    async def exit_clean(self, leave: Cluster | None = None) -> None:
        """End: the session closed, `leave` (a cluster) left running and said so."""
        self.closing = True
        self.session.keep_on_cancel = leave is not None
        self.workers.cancel_group(self, "watch")
        self.workers.cancel_group(self, "follow")
        self.workers.cancel_group(self, "sync")  # a rerun resumes it
        try:
            await self.session.close()
        finally:
            if leave is not None:
                # Printed after the screen is restored, so it stays in the user's terminal.
                self.exit(
                    0,
                    message=f"cluster {leave.cluster_id} ({leave.recipe}) left running; "
                    f"to come back to it: {self.session.reattach_hint}",
                )
            else:
                self.exit(0)

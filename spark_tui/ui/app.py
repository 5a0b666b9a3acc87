"""The cockpit: nodes, recipes, fit, one log pane per rank, smoke and tuning in one screen."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal
from textual.events import Resize
from textual.widgets import Footer, Input, OptionList, Static
from textual.worker import Worker, WorkerState

from spark_tui.core.errors import SparkError
from spark_tui.ops.events import (
    ClusterReady,
    Event,
    LogLine,
    Notice,
    RankState,
    RankStateChanged,
)
from spark_tui.ui.config import CockpitConfig
from spark_tui.ui.palette import CockpitCommands
from spark_tui.ui.screens.dialogs import Dialog, HostKeyDialog, QuitDialog
from spark_tui.ui.themes import DEFAULT_THEME, NO_COLOR_THEME, load_themes
from spark_tui.ui.widgets.fitpanel import FitPanel
from spark_tui.ui.widgets.logpane import LogPane
from spark_tui.ui.widgets.nodes import NodePanel
from spark_tui.ui.widgets.recipes import RecipePanel
from spark_tui.ui.widgets.results import ResultsBar

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.recipe import Recipe
    from spark_tui.ui.backend import Backend, NodeProbe
    from spark_tui.ui.widgets.nodes import NodeView


class _Actions:
    """`spark_tui.ui.actions`, imported on first use: it pulls in the domain (plans, fit,
    recipes), which the first frame does not need (the demo's first frame has a budget)."""

    def __getattr__(self, name: str) -> Any:
        from spark_tui.ui import actions as module

        return getattr(module, name)


actions = _Actions()

# Side by side up to this many ranks; tabs beyond.
SIDE_BY_SIDE = 2
REFRESH_SECONDS = 15.0
# Below these sizes the layout gets compact (80x24 over SSH is the smallest we design for).
SHORT_HEIGHT = 34
NARROW_WIDTH = 120
# How long quitting waits for the cluster to stop when the terminal went away, and how
# long the app may then take to end before the process ends itself.
GONE_STOP_TIMEOUT = 20.0
GONE_EXIT_DEADLINE = 5.0


def _detach_from_terminal() -> None:
    """Point stdout and stderr at /dev/null: writes to a hung-up terminal fail or block,
    and there is nobody left to read them."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)


@dataclass
class ClusterView:
    """The cluster this cockpit launched or attached to."""

    cluster_id: str
    recipe: str
    sets: dict[str, str]
    base_url: str | None = None
    model: str | None = None
    ready: bool = False
    failed: bool = False
    states: dict[int, str] = field(default_factory=dict)
    launch_run: str | None = None
    # Set once the launch is decided: every rank ready, or a rank failed.
    settled: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def running(self) -> bool:
        """Containers of this cluster may be running (a failed launch removed them)."""
        return not self.failed


class SparkApp(App[int]):
    """The spark-tui cockpit."""

    TITLE = "spark-tui"
    COMMANDS = App.COMMANDS | {CockpitCommands}
    CSS = """
    Screen { layout: vertical; overflow: hidden; }
    #title { height: 1; padding: 0 1; background: $panel; color: $text; }
    #title.simulated { background: $accent 30%; }
    #top { height: 11; }
    #top > NodePanel { width: 1fr; }
    #top > RecipePanel { width: 1fr; }
    #top > FitPanel { width: 1fr; }
    #logs { height: 1fr; min-height: 5; }
    #logs > Horizontal { height: 1fr; }
    #logs TabbedContent { height: 1fr; }
    #logs TabPane { padding: 0; }
    #filter { dock: bottom; display: none; height: 1; margin-bottom: 1; }
    #filter.visible { display: block; }
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
        Binding("slash", "filter", "filter", id="filter"),
        Binding("f", "fullscreen", "full screen log", id="fullscreen", show=False),
        Binding("c", "compact", "compact/full log lines", id="compact", show=False),
        Binding("r", "refresh", "refresh nodes", id="refresh", show=False),
        Binding("question_mark", "help", "help", id="help"),
        Binding("escape", "back", "back", id="back", show=False),
        Binding("q", "quit_cockpit", "quit", id="quit"),
    ]

    def __init__(
        self,
        backend: Backend,
        *,
        recipe: str | None = None,
        theme: str | None = None,
        config: CockpitConfig | None = None,
        auto_refresh: bool = True,
        bench_levels: list[int] | None = None,
        handle_signals: bool = True,
    ) -> None:
        driver = None
        if sys.platform != "win32":
            from spark_tui.ui.driver import CockpitDriver

            driver = CockpitDriver
        super().__init__(driver_class=driver)
        self.backend = backend
        self.config = config or CockpitConfig()
        self.initial_recipe = recipe
        self.requested_theme = theme or self.config.theme
        self.periodic_refresh = auto_refresh
        self.bench_levels = bench_levels or [1, 4, 8]
        self.handle_signals = handle_signals
        self.views: list[NodeView] = []
        self.recipes: list[Recipe] = []
        self.sets: dict[str, dict[str, str]] = {}
        self.cluster: ClusterView | None = None
        self.panes: dict[int, LogPane] = {}
        self.last_smoke: list[dict[str, Any]] | None = None
        self.last_bench: dict[str, Any] | None = None
        self.last_compare: Text | None = None
        self.busy: str | None = None
        self.filter_target: str = "logs"
        self.discovered = asyncio.Event()
        self.closing = False
        self._signals: list[int] = []
        self._fit_nodes: list[NodeFacts] = []
        self.theme_names: list[str] = []

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        title = Static(self._title_text(), id="title")
        if self.backend.simulated:
            title.add_class("simulated")
        yield title
        with Horizontal(id="top"):
            yield NodePanel(id="nodes")
            yield RecipePanel(id="recipes")
            yield FitPanel(id="fit")
        yield Container(id="logs")
        yield ResultsBar(id="results")
        yield Footer()

    def _title_text(self) -> Text:
        text = Text("spark-tui ", style="bold")
        text.append(self.backend.label, style="bold" if self.backend.simulated else "")
        return text

    async def on_mount(self) -> None:
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
        if self.config.keys:
            self._apply_keymap(self.config.keys, problems)
        for problem in problems:
            self.notify(problem, severity="warning", timeout=8)
        self._install_signal_handlers()
        self.query_one(NodePanel).show_message("discovering nodes…")
        # The first frame goes out before anything slow: recipes, fit checks, the nodes.
        self.call_after_refresh(self._after_first_frame)

    def _apply_keymap(self, keys: dict[str, str], problems: list[str]) -> None:
        known = {b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id}
        unknown = sorted(set(keys) - known)
        if unknown:
            problems.append(
                f"config keys: unknown binding ids {unknown}; known: {', '.join(sorted(known))}"
            )
        self.set_keymap({k: v for k, v in keys.items() if k in known})

    def _after_first_frame(self) -> None:
        self.recipes = actions.load_recipes(self._warn)
        self._refresh_recipes(keep=self.initial_recipe)
        self.query_one("#recipe-list", OptionList).focus()
        self.discover()

    def on_resize(self, event: Resize) -> None:
        short, narrow = event.size.height < SHORT_HEIGHT, event.size.width < NARROW_WIDTH
        self.set_class(short, "-short")
        self.set_class(narrow, "-narrow")
        with contextlib.suppress(Exception):
            footer = self.query_one(Footer)
            footer.compact = narrow
            footer.show_command_palette = not narrow

    def _warn(self, message: str) -> None:
        self.notify(message, severity="warning", timeout=8)

    # ------------------------------------------------------- errors & signals
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker's error is shown with its remedy; nothing reaches the screen as a trace."""
        if event.state is not WorkerState.ERROR:
            return
        exc = event.worker.error
        if isinstance(exc, SparkError):
            self._error(exc.message, exc.remedy)
            return
        where = self._write_crash_log(exc)
        self._error(
            f"unexpected error in {event.worker.name or 'a task'}: {type(exc).__name__}: {exc}",
            f"the details are in {where}; please report it. The cockpit keeps running: "
            "try the action again, or quit (q)",
        )

    def _write_crash_log(self, exc: BaseException | None) -> str:
        from spark_tui.ui.paths import user_config_dir

        path = Path(os.environ.get("SPARK_TUI_CRASH_LOG") or user_config_dir() / "crash.log")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                if exc is not None:
                    fh.writelines(traceback.format_exception(exc))
                fh.write("\n")
        except OSError:
            return "(no crash log could be written)"
        return str(path)

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
            _detach_from_terminal()
            driver = self._driver
            if driver is not None:
                # Restoring the terminal's modes on exit writes to it: nowhere to write now.
                driver.write = lambda _data: None  # type: ignore[method-assign]
        self._gone(why)

    @work(group="exit", exit_on_error=False)
    async def _gone(self, why: str) -> None:
        try:
            if self.cluster is not None and self.cluster.running and self.backend.simulated:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._stop_now(), GONE_STOP_TIMEOUT)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.backend.close(), GONE_STOP_TIMEOUT)
            if self.handle_signals:
                # Everything is cleaned up; should restoring a dead terminal hang, end anyway.
                timer = threading.Timer(GONE_EXIT_DEADLINE, os._exit, (0,))
                timer.daemon = True
                timer.start()
            self.exit(0)

    async def on_unmount(self) -> None:
        self._remove_signal_handlers()

    # ------------------------------------------------------------------ nodes
    @property
    def nodes(self) -> list[NodeFacts]:
        return [v.facts for v in self.views if v.facts is not None]

    @property
    def fit_nodes(self) -> list[NodeFacts]:
        """The facts fit checks use: while our cluster runs, the nodes as they were before
        it started (its own engines hold the memory a relaunch would get back)."""
        if self.cluster is not None and self.cluster.running and self._fit_nodes:
            return self._fit_nodes
        return self.nodes

    @work(exclusive=True, group="discover", exit_on_error=False)
    async def discover(self) -> None:
        self._status("discovering nodes…")
        try:
            await self.backend.start()
            probes = await self.backend.discover(self._confirm_host_key)
        except SparkError as exc:
            self.query_one(NodePanel).show_message(f"{exc.message}\n→ {exc.remedy}")
            self._error(exc.message, exc.remedy)
            return
        self._show_probes(probes)
        reachable = len(self.nodes)
        self._status(f"{reachable} of {len(probes)} nodes reachable; pick a recipe and press l")
        self.discovered.set()
        if self.periodic_refresh:
            self.set_interval(REFRESH_SECONDS, self.refresh_nodes)
        await self._maybe_attach()

    async def _confirm_host_key(self, host: str, fingerprint: str) -> bool:
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def done(ok: bool | None) -> None:
            if not answer.done():
                answer.set_result(bool(ok))

        self.push_screen(HostKeyDialog(host, fingerprint), done)
        return await answer

    @work(exclusive=True, group="refresh", exit_on_error=False)
    async def refresh_nodes(self) -> None:
        if self.busy:
            return  # probing during a launch or a benchmark would disturb the figures
        try:
            probes = await self.backend.refresh()
        except SparkError:
            return  # the next refresh tries again; the panel keeps the last facts
        self._show_probes(probes)

    def action_refresh(self) -> None:
        self.refresh_nodes()

    def _show_probes(self, probes: list[NodeProbe]) -> None:
        from spark_tui.ui.widgets.nodes import NodeView

        self.views = [
            NodeView(
                name=p.name,
                state="reachable" if p.facts else "error",
                facts=p.facts,
                error=p.error,
                remedy=p.remedy,
            )
            for p in probes
        ]
        self.query_one(NodePanel).show(self.views)
        if self.cluster is None or not self.cluster.running:
            self._fit_nodes = self.nodes
        self._refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        if not self.cluster:
            self._build_panes([(i, v.name) for i, v in enumerate(self.views)])

    # ---------------------------------------------------------------- recipes
    def _refresh_recipes(self, keep: str | None = None) -> None:
        from spark_tui.ui.widgets.recipes import RecipeRow

        nodes = self.fit_nodes
        rows = []
        for recipe in self.recipes:
            verdict = None
            if nodes:
                verdict = actions.evaluate(recipe, self.sets.get(recipe.name, {}), nodes).verdict
            rows.append(RecipeRow(recipe, verdict))
        self.query_one(RecipePanel).set_rows(rows, keep=keep)
        self._show_selected()

    @property
    def selected(self) -> Recipe | None:
        name = self.query_one(RecipePanel).selected_name
        return next((r for r in self.recipes if r.name == name), None)

    @on(OptionList.OptionHighlighted, "#recipe-list")
    def _recipe_highlighted(self) -> None:
        self._show_selected()

    def _show_selected(self) -> None:
        recipe = self.selected
        fit = self.query_one(FitPanel)
        panel = self.query_one(RecipePanel)
        if recipe is None:
            fit.show(None)
            panel.show_details(None, {})
            return
        result = actions.evaluate(recipe, self.sets.get(recipe.name, {}), self.fit_nodes)
        panel.show_details(recipe, result.settings_shown)
        fit.border_title = f"Fit: {recipe.name}"
        frozen = self.cluster is not None and self.cluster.running
        fit.border_subtitle = "memory as before the launch" if frozen else ""
        if not self.nodes:
            fit.show(None, "no reachable nodes yet: the fit check needs their memory")
        else:
            fit.show(result.report, result.problem)

    # -------------------------------------------------------------- log panes
    def _build_panes(self, ranks: list[tuple[int, str]]) -> None:
        logs = self.query_one("#logs", Container)
        logs.remove_children()
        self.panes = {
            rank: LogPane(rank, node, role="head" if i == 0 else None)
            for i, (rank, node) in enumerate(ranks)
        }
        if len(ranks) <= SIDE_BY_SIDE:
            logs.mount(Horizontal(*self.panes.values()))
        else:
            from textual.widgets import TabbedContent, TabPane

            tabs = TabbedContent(id="rank-tabs")
            for rank, pane in self.panes.items():
                # Given before mounting, as `with TabbedContent():` does in compose.
                tabs.compose_add_child(TabPane(f"rank {rank}", pane, id=f"tab-{rank}"))
            logs.mount(tabs)

    def _tab_label(self, rank: int, state: str) -> None:
        if len(self.panes) <= SIDE_BY_SIDE:
            return
        from textual.widgets import TabbedContent

        with contextlib.suppress(Exception):
            tab = self.query_one("#rank-tabs", TabbedContent).get_tab(f"tab-{rank}")
            mark = {"ready": "✓", "failed": "✗", "loading": "…", "stopped": "■"}.get(state, "")
            tab.label = f"rank {rank} {mark}".rstrip()

    def _status(self, text: str | Text) -> None:
        self.query_one(ResultsBar).set_status(text)

    def _error(self, message: str, remedy: str | None) -> None:
        text = Text(message, style="bold red")
        if remedy:
            text.append(f"  → {remedy}", style="")
        self._status(text)
        self.notify(f"{message}\n→ {remedy}" if remedy else message, severity="error", timeout=10)

    # ----------------------------------------------------------------- launch
    def action_launch(self) -> None:
        recipe = self.selected
        if recipe is None:
            self.notify("pick a recipe first", severity="warning")
            return
        if self.cluster and self.cluster.running:
            self.notify(
                f"cluster {self.cluster.cluster_id} is running: stop it first (s)",
                severity="warning",
            )
            return
        if self.busy:
            self.notify(f"busy: {self.busy}", severity="warning")
            return
        if not self.nodes:
            self.notify(
                "no reachable node yet: wait for discovery (r refreshes)", severity="warning"
            )
            return
        result = actions.evaluate(recipe, self.sets.get(recipe.name, {}), self.fit_nodes)
        if result.problem or result.plan is None:
            self._error(result.problem or "no launch plan", "fix the recipe or the settings (e)")
            return
        if result.verdict in ("does_not_fit", "unknown"):
            errors = [f for f in result.report.get("findings", []) if f["severity"] == "error"]
            reasons = "\n".join(
                f"• {f['message']}" + (f"\n  → {f['remedy']}" if f.get("remedy") else "")
                for f in errors
            ) or "• facts are missing: " + ", ".join(
                f["message"] for f in result.report.get("findings", [])
            )
            verdict = "does not fit" if result.verdict == "does_not_fit" else "cannot be checked"
            body = Text(f"{recipe.name} {verdict} on these nodes:\n{reasons}\n\n")
            body.append("vLLM will most likely fail at startup. Launch anyway?", style="bold")

            def insist(yes: bool | None) -> None:
                if yes:
                    self.run_launch(recipe, dict(self.sets.get(recipe.name, {})))
                else:
                    self._status(f"launch of {recipe.name} refused by the fit check")

            self.push_screen(
                Dialog("Launch refused by the fit check", body, yes="Launch anyway"), insist
            )
            return
        self.run_launch(recipe, dict(self.sets.get(recipe.name, {})))

    def run_launch(self, recipe: Recipe, sets: dict[str, str]) -> None:
        self._launch(recipe, sets)

    @work(exclusive=True, group="launch", exit_on_error=False)
    async def _launch(self, recipe: Recipe, sets: dict[str, str]) -> None:
        await self._launch_and_wait(recipe, sets)

    async def _launch_and_wait(self, recipe: Recipe, sets: dict[str, str]) -> bool:
        """Start the ranks, follow them in the background, return once ready (or failed)."""
        result = actions.evaluate(recipe, sets, self.fit_nodes)
        plan = result.plan
        if plan is None:
            self._error(result.problem or "no launch plan", "fix the settings (e)")
            return False
        cluster = ClusterView(plan.cluster_id, recipe.name, sets, model=result.served_model)
        self.cluster = cluster
        self.busy = "launching"
        self._build_panes([(r.rank, r.node) for r in plan.ranks])
        self.query_one(ResultsBar).clear_results()
        self.last_compare = None
        self._status(f"launching {recipe.name} as cluster {plan.cluster_id}…")
        self._follow_cluster(cluster, self.backend.launch(plan))
        try:
            await cluster.settled.wait()
        finally:
            self.busy = None
        if cluster.ready:
            cluster.launch_run = actions.record_launch(plan, recipe, sets)
        return cluster.ready

    @work(exclusive=True, group="follow", exit_on_error=False)
    async def _follow_cluster(self, cluster: ClusterView, events: AsyncIterator[Event]) -> None:
        """Follow a cluster's events for as long as it runs (logs keep coming after ready)."""
        try:
            await self._follow(cluster, events)
        except SparkError as exc:
            cluster.failed = True
            cluster.ready = False
            self._error(exc.message, exc.remedy)
        except Exception:
            cluster.failed = True
            cluster.ready = False
            raise  # shown by on_worker_state_changed, with the crash log's path
        finally:
            for pane in self.panes.values():
                pane.flush()
            cluster.settled.set()

    async def _follow(self, cluster: ClusterView, events: AsyncIterator[Event]) -> None:
        async for event in events:
            if isinstance(event, LogLine):
                pane = self.panes.get(event.rank)
                if pane is not None:
                    pane.push(event.text)
            elif isinstance(event, RankStateChanged):
                self._rank_state(cluster, event)
            elif isinstance(event, ClusterReady):
                cluster.base_url = event.base_url
                cluster.ready = True
                cluster.settled.set()
                text = Text(f"cluster {event.cluster_id} ready ", style="bold green")
                text.append("(t smoke · b bench · e edit a setting · s stop)", style="dim")
                self._status(text)
            elif isinstance(event, Notice):
                message = event.message + (f"\n→ {event.remedy}" if event.remedy else "")
                if event.level == "error":
                    self._error(event.message, event.remedy)
                elif event.level == "warning":
                    self.notify(message, severity="warning", timeout=8)
                elif not cluster.ready:
                    self._status(event.message)

    def _rank_state(self, cluster: ClusterView, event: RankStateChanged) -> None:
        cluster.states[event.rank] = event.state.value
        self._tab_label(event.rank, event.state.value)
        pane = self.panes.get(event.rank)
        if pane is None:
            return
        pane.flush()
        pane.set_state(event.state.value, event.progress)
        if event.state == RankState.FAILED:
            pane.show_failure(event.reason or "failed", list(event.explaining_lines))
            cluster.failed = True
            cluster.ready = False
            # One toast per failure comes with the launch's error; the status says which rank.
            text = Text(
                f"rank {event.rank} on {event.node} {event.reason or 'failed'}", style="bold red"
            )
            text.append("  → the lines that explain it are at the top of its pane", style="")
            self._status(text)

    async def _maybe_attach(self) -> None:
        try:
            running = await self.backend.running()
        except SparkError:
            return
        if running is None or self.cluster is not None:
            return
        cluster = ClusterView(running.cluster_id, running.recipe, {})
        self.cluster = cluster
        self._build_panes([(r["rank"], r["node"]) for r in running.ranks])
        self._status(f"attached to running cluster {running.cluster_id} ({running.recipe})")
        self._follow_cluster(cluster, self.backend.attach(running.cluster_id))

    # ------------------------------------------------------------------- stop
    def action_stop(self) -> None:
        cluster = self.cluster
        if cluster is None or not cluster.running:
            self.notify("nothing to stop: no cluster of ours is running", severity="information")
            return
        body = Text(f"Stop cluster {cluster.cluster_id} ({cluster.recipe})?\n")
        body.append("Every rank's container on every node is stopped and removed.")

        def answer(yes: bool | None) -> None:
            if yes:
                self._stop()

        self.push_screen(Dialog("Stop the cluster", body, yes="Stop"), answer)

    @work(exclusive=True, group="stop", exit_on_error=False)
    async def _stop(self) -> None:
        await self._stop_now()

    async def _stop_now(self) -> bool:
        cluster = self.cluster
        if cluster is None:
            return True
        self.workers.cancel_group(self, "follow")
        self.workers.cancel_group(self, "launch")
        self._status(f"stopping {cluster.cluster_id}…")
        try:
            left = await self.backend.stop(cluster.cluster_id)
        except SparkError as exc:
            self._error(exc.message, exc.remedy)
            return False
        if left:
            self._error(
                f"still running after stop: {', '.join(left)}",
                "check the nodes with `spark-tui status` and remove them with `docker rm -f`",
            )
            return False
        for rank, pane in self.panes.items():
            pane.flush()
            if pane.state != "failed":
                pane.set_state("stopped")
                self._tab_label(rank, "stopped")
        cluster.failed = True  # nothing of it runs any more
        cluster.ready = False
        cluster.settled.set()
        self._status(f"cluster {cluster.cluster_id} stopped: no container left on any node")
        self.cluster = None
        return True

    # ---------------------------------------------------------- smoke & bench
    def _ready_cluster(self) -> ClusterView | None:
        if self.cluster and self.cluster.ready and self.cluster.base_url:
            if self.busy:
                self.notify(f"busy: {self.busy}", severity="warning")
                return None
            return self.cluster
        self.notify("no ready cluster: launch one first (l)", severity="warning")
        return None

    def action_smoke(self) -> None:
        if self._ready_cluster():
            self._smoke()

    @work(exclusive=True, group="smoke", exit_on_error=False)
    async def _smoke(self) -> None:
        await self._smoke_now()

    async def _smoke_now(self) -> list[dict[str, Any]]:
        cluster = self.cluster
        assert cluster is not None and cluster.base_url
        self._status("running the smoke checks: health, models, chat, tool call, streaming…")
        results = await self.backend.smoke(cluster.base_url, cluster.model)
        self.last_smoke = results
        self.query_one(ResultsBar).set_smoke(results)
        failed = [r["name"] for r in results if not r.get("ok")]
        if failed:
            self._status(Text(f"smoke checks failed: {', '.join(failed)}", style="bold red"))
        else:
            self._status(
                Text(f"smoke checks passed ({len(results)}/{len(results)})", style="bold green")
            )
        actions.record_smoke(
            cluster.cluster_id, cluster.recipe, cluster.sets, results, cluster.base_url
        )
        return results

    def action_bench(self) -> None:
        if self._ready_cluster():
            self._bench()

    @work(exclusive=True, group="bench", exit_on_error=False)
    async def _bench(self) -> None:
        await self._bench_now()

    async def _bench_now(self) -> dict[str, Any]:
        cluster = self.cluster
        assert cluster is not None and cluster.base_url
        self.busy = "benchmark"
        self._status(f"benchmark: concurrency {', '.join(map(str, self.bench_levels))}…")
        try:
            result = await self.backend.bench(
                cluster.base_url, cluster.model, self.bench_levels, self._status
            )
        finally:
            self.busy = None
        self.last_bench = result
        self.query_one(ResultsBar).set_bench(result.get("levels"))
        levels = result.get("levels") or []
        self._status(
            Text(
                f"benchmark done: {len(levels)} concurrency levels (b runs it again)", style="bold"
            )
        )
        run = actions.record_bench(cluster.cluster_id, cluster.recipe, cluster.sets, result)
        result["run"] = run
        result["sets"] = dict(cluster.sets)
        return result

    # -------------------------------------------------------------- tuning
    def action_edit(self) -> None:
        cluster = self.cluster
        recipe = self.selected
        if cluster is not None and cluster.running:
            # The running cluster's recipe is the one being tuned.
            recipe = next((r for r in self.recipes if r.name == cluster.recipe), recipe)
        if recipe is None:
            self.notify("pick a recipe first", severity="warning")
            return
        if self.busy:
            self.notify(f"busy: {self.busy}", severity="warning")
            return
        sets = self.sets.get(recipe.name, {})
        keys, current = actions.editable_settings(recipe, sets)

        def preview(key: str, value: str) -> tuple[str | None, Text]:
            return actions.preview_change(recipe, sets, key, value, self.fit_nodes)

        def chosen(change: tuple[str, str] | None) -> None:
            if change:
                self._tune(recipe, change)

        from spark_tui.ui.screens.edit import EditSettingDialog

        self.push_screen(EditSettingDialog(keys, current, preview, recipe=recipe.name), chosen)

    @work(exclusive=True, group="tune", exit_on_error=False)
    async def _tune(self, recipe: Recipe, change: tuple[str, str]) -> None:
        key, value = change
        old_sets = dict(self.sets.get(recipe.name, {}))
        new_sets = {**old_sets, key: value}
        cluster = self.cluster
        running = cluster is not None and cluster.ready and cluster.recipe == recipe.name
        if not running:
            # Nothing to compare against yet: remember the setting for the next launch.
            self.sets[recipe.name] = new_sets
            self._refresh_recipes(keep=recipe.name)
            self._status(f"{key}={value} set for {recipe.name}; press l to launch")
            return
        if self.last_bench is None or self.last_bench.get("sets") != old_sets:
            self._status("measuring the baseline before the change…")
            before = await self._bench_now()
        else:
            before = self.last_bench
        if not await self._stop_now():
            return
        self.sets[recipe.name] = new_sets
        self._refresh_recipes(keep=recipe.name)
        self._status(f"relaunching every rank with {key}={value}…")
        if not await self._launch_and_wait(recipe, new_sets):
            self._error(
                f"the relaunch with {key}={value} failed",
                "read the failed rank's pane; press e to change the setting back",
            )
            return
        smoke = await self._smoke_now()
        after = await self._bench_now()
        baseline = actions.baseline_run(before.get("run"))
        if baseline is not None and after.get("run") is not None:
            text = actions.comparison_text(baseline, after["run"], smoke)
        else:
            text = Text("no comparison: the runs could not be recorded in the history", style="red")
        self.last_compare = text
        self.query_one(ResultsBar).set_compare(text)
        self._status(
            Text(f"relaunched with {key}={value}: compared with the baseline below", style="bold")
        )

    def action_history(self) -> None:
        try:
            runs = actions.history_rows()
        except SparkError as exc:
            self._error(exc.message, exc.remedy)
            return
        from spark_tui.ui.screens.info import HistoryScreen

        self.push_screen(HistoryScreen(runs, actions.describe_run))

    # ------------------------------------------------------- filter & views
    def action_filter(self) -> None:
        focused = self.focused
        in_recipes = focused is not None and any(
            isinstance(node, RecipePanel) for node in focused.ancestors_with_self
        )
        self.filter_target = "recipes" if in_recipes else "logs"
        box = self._filter_box()
        if in_recipes:
            box.value = self.query_one(RecipePanel).filter_text
        else:
            box.value = next(iter(self.panes.values())).filter_text if self.panes else ""
        box.placeholder = f"/ filter {self.filter_target} (regex); Enter keeps it, Esc clears"
        box.add_class("visible")
        box.focus()

    def _filter_box(self) -> Input:
        """The filter line, made on first use (the first frame does without it)."""
        found = self.query("#filter")
        if found:
            return found.first(Input)
        box = Input(id="filter", compact=True)
        self.mount(box, before=self.query_one(Footer))
        return box

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if self.filter_target == "recipes":
            self.query_one(RecipePanel).set_filter(event.value)
        else:
            for pane in self.panes.values():
                pane.filter_text = event.value

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self._filter_box().remove_class("visible")
        if self.filter_target == "recipes":
            self.query_one("#recipe-list").focus()
        elif self.panes:
            next(iter(self.panes.values())).query_one("RankLog").focus()

    def action_back(self) -> None:
        found = self.query("#filter")
        box = found.first(Input) if found else None
        if box is not None and box.has_class("visible"):
            box.value = ""
            self._filter_done()
        elif self.screen.maximized is not None:
            self.screen.minimize()

    def action_fullscreen(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
            return
        focused = self.focused
        pane = next(
            (n for n in (focused.ancestors_with_self if focused else []) if isinstance(n, LogPane)),
            None,
        )
        if pane is None and len(self.panes) > SIDE_BY_SIDE:
            from textual.widgets import TabbedContent

            with contextlib.suppress(Exception):
                active = self.query_one("#rank-tabs", TabbedContent).active
                pane = self.panes.get(int(active.removeprefix("tab-")))
        pane = pane or next(iter(self.panes.values()), None)
        if pane is not None:
            self.screen.maximize(pane, container=False)
            pane.query_one("RankLog").focus()

    def action_compact(self) -> None:
        compact = not all(p.compact for p in self.panes.values())
        for pane in self.panes.values():
            pane.compact = compact
        self.notify("log lines: " + ("compact" if compact else "full (with prefixes)"))

    def _key_of(self, binding_id: str, fallback: str) -> str:
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

    def action_help(self) -> None:
        rows = [
            (self._key_of(b.id or "", b.key), b.description)
            for b in self.BINDINGS
            if isinstance(b, Binding)
        ]
        rows += [
            ("ctrl+p", "command palette: every action, and the themes"),
            ("tab / shift+tab", "next / previous panel"),
            ("↑ ↓ pgup pgdn", "move in a list, scroll a log (scrolling up stops following)"),
            ("end", "in a log: back to the tail (follows again)"),
        ]
        notes = (
            "Keys can be remapped in the config file (keys: {launch: f5}).\n"
            "The fit check runs before every launch; l refuses a recipe that does not fit\n"
            "unless you insist. Quitting with a cluster running asks whether to stop it."
        )
        from spark_tui.ui.screens.info import HelpScreen

        self.push_screen(HelpScreen(rows, notes))

    # ------------------------------------------------------------------ quit
    def action_quit_cockpit(self) -> None:
        cluster = self.cluster
        if cluster is None or not cluster.running:
            self._exit_clean()
            return
        if self.backend.simulated:
            body = Text(
                f"Cluster {cluster.cluster_id} runs on the simulated Sparks of this demo;\n"
            )
            body.append("quitting stops it (the simulated nodes end with the demo).")

            def stop_sim(yes: bool | None) -> None:
                if yes:
                    self._stop_and_exit()

            self.push_screen(Dialog("Quit the demo", body, yes="Stop and quit"), stop_sim)
            return

        def choose(choice: str | None) -> None:
            if choice == "stop":
                self._stop_and_exit()
            elif choice == "leave":
                self._exit_clean(leave=cluster)

        self.push_screen(QuitDialog(cluster.cluster_id, self.backend.reattach_hint), choose)

    @work(exclusive=True, group="stop", exit_on_error=False)
    async def _stop_and_exit(self) -> None:
        self.closing = True
        if await self._stop_now():
            self._exit_clean()
        else:
            self.closing = False

    @work(group="exit", exit_on_error=False)
    async def _exit_clean(self, leave: ClusterView | None = None) -> None:
        self.closing = True
        self.workers.cancel_group(self, "follow")
        try:
            await self.backend.close()
        finally:
            if leave is not None:
                # Printed after the screen is restored, so it stays in the user's terminal.
                self.exit(
                    0,
                    message=f"cluster {leave.cluster_id} ({leave.recipe}) left running; "
                    f"to come back to it: {self.backend.reattach_hint}",
                )
            else:
                self.exit(0)

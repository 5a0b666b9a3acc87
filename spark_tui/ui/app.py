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
from spark_tui.service import events as ev
from spark_tui.ui import messages as msg
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
    from spark_tui.service.evaluate import Evaluation
    from spark_tui.service.session import Cluster, Session
    from spark_tui.ui.widgets.nodes import NodeView


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
        session: Session,
        *,
        recipe: str | None = None,
        theme: str | None = None,
        config: CockpitConfig | None = None,
        auto_refresh: bool = True,
        handle_signals: bool = True,
    ) -> None:
        driver = None
        if sys.platform != "win32":
            from spark_tui.ui.driver import CockpitDriver

            driver = CockpitDriver
        super().__init__(driver_class=driver)
        self.session = session
        self.config = config or CockpitConfig()
        self.initial_recipe = recipe
        self.requested_theme = theme or self.config.theme
        self.periodic_refresh = auto_refresh
        self.handle_signals = handle_signals
        self.views: list[NodeView] = []
        self.recipes: list[Recipe] = []
        self.sets: dict[str, dict[str, str]] = {}
        self.panes: dict[int, LogPane] = {}
        self.last_smoke: list[dict[str, Any]] | None = None
        self.last_bench: ev.BenchDone | None = None
        self.last_compare: Text | None = None
        self.busy: str | None = None
        self.filter_target: str = "logs"
        self.discovered = asyncio.Event()
        self.closing = False
        self._signals: list[int] = []
        self.theme_names: list[str] = []

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        title = Static(self._title_text(), id="title")
        if self.session.simulated:
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
        text.append(self.session.label, style="bold" if self.session.simulated else "")
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
        from spark_tui.service.evaluate import load_recipes

        self.recipes = load_recipes(self._warn)
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
        # A real cluster is left running, even one still loading.
        self.session.keep_on_cancel = not self.session.simulated
        try:
            if self.cluster is not None and self.cluster.running and self.session.simulated:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._stop_now(), GONE_STOP_TIMEOUT)
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

    # ------------------------------------------------------------------ nodes
    @property
    def nodes(self) -> list[NodeFacts]:
        return [v.facts for v in self.views if v.facts is not None]

    @property
    def cluster(self) -> Cluster | None:
        """The cluster the session launched or attached to."""
        return self.session.cluster

    def evaluate(self, recipe: Recipe, sets: dict[str, str] | None = None) -> Evaluation:
        """The service's recipe pipeline on the nodes (our cluster's memory counted free)."""
        return self.session.evaluate(
            recipe, self.sets.get(recipe.name, {}) if sets is None else sets
        )

    async def consume(self, events: AsyncIterator[Any]) -> None:
        """Turn a service action's events into messages; answer its questions in dialogs.
        Log lines go straight into their pane's buffer (written in batches on a timer)."""
        from spark_tui.service.measure import is_own_request

        smoke: list[dict[str, Any]] = []
        async for event in events:
            if isinstance(event, ev.LogLine):
                pane = self.panes.get(event.rank)
                if pane is not None:
                    pane.push(event.text, event.kind, own=is_own_request(event))
            elif isinstance(event, ev.Question):
                event.reply(await self._ask(event))
            elif isinstance(event, ev.Probed):
                self.post_message(msg.NodesProbed(event))
            elif isinstance(event, ev.RankStateChanged):
                self.post_message(msg.RankChanged(event))
            elif isinstance(event, ev.ClusterReady):
                self.post_message(msg.ClusterUp(event))
            elif isinstance(event, ev.Endpoint):
                self.post_message(msg.EndpointKnown(event))
            elif isinstance(event, ev.Notice):
                self.post_message(msg.ServiceNotice(event))
            elif isinstance(event, ev.NodeUnreachable):
                # The link is down, the ranks are not failed for it: say so, keep waiting.
                self.post_message(msg.ServiceNotice(ev.Notice("warning", event.text, event.remedy)))
            elif isinstance(event, ev.NodeReachable):
                text = f"{event.node} reachable again after {event.outage_seconds:.0f} s"
                self.post_message(msg.ServiceNotice(ev.Notice("info", text)))
            elif isinstance(event, ev.SmokeChecked):
                smoke.append(event.result.to_dict())
                self.post_message(msg.SmokeUpdate(list(smoke), None))
            elif isinstance(event, ev.SmokeDone):
                smoke = [r.to_dict() for r in event.results]
                self.post_message(msg.SmokeUpdate(smoke, event))
                smoke = []
            elif isinstance(event, ev.BenchProgressed):
                p = event.progress
                self.post_message(
                    msg.BenchUpdate(
                        progress=f"benchmark: concurrency {p.concurrency} "
                        f"({p.level_index + 1}/{p.levels}), {p.done}/{p.total} requests, "
                        f"{p.errors} errors, {p.elapsed_s:.0f} s"
                    )
                )
            elif isinstance(event, ev.BenchDone):
                levels = [lv.to_dict() for lv in event.result.levels]
                self.post_message(msg.BenchUpdate(levels=levels, done=event))
            elif isinstance(event, ev.Compared):
                self.post_message(msg.TuneCompared(event))
            elif isinstance(event, ev.Stopped):
                self.post_message(msg.ClusterStopped(event))
            elif isinstance(event, ev.Recorded) and event.error:
                self._warn(event.error)

    async def _ask(self, question: ev.Question) -> bool:
        """A question of the service, as a dialog; the answer once the user gives it."""
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def done(ok: bool | None) -> None:
            if not answer.done():
                answer.set_result(bool(ok))

        if question.kind == ev.HOST_KEY:
            dialog: Dialog = HostKeyDialog(question.data["host"], question.data["fingerprint"])
        else:
            dialog = Dialog(question.title, Text(question.text), yes=question.yes_label)
        self.push_screen(dialog, done)
        return await answer

    @work(exclusive=True, group="discover", exit_on_error=False)
    async def discover(self) -> None:
        self._status("discovering nodes…")
        try:
            await self.session.start()
            await self.consume(self.session.discover())
        except SparkError as exc:
            self.query_one(NodePanel).show_message(f"{exc.message}\n→ {exc.remedy}")
            self._error(exc.message, exc.remedy)
            return
        reachable = len(self.session.reachable)
        self._status(
            f"{reachable} of {len(self.session.facts)} nodes reachable; pick a recipe and "
            f"press {self._key_of('launch', 'l')}"
        )
        self.discovered.set()
        if self.periodic_refresh:
            self.set_interval(REFRESH_SECONDS, self.refresh_nodes)
        await self._maybe_attach()

    @work(exclusive=True, group="refresh", exit_on_error=False)
    async def refresh_nodes(self) -> None:
        if self.busy:
            return  # probing during a launch or a benchmark would disturb the figures
        with contextlib.suppress(SparkError):  # the next refresh tries again
            await self.consume(self.session.probe())

    def action_refresh(self) -> None:
        self.refresh_nodes()

    def on_nodes_probed(self, message: msg.NodesProbed) -> None:
        self._show_probes(message.probed)

    def _show_probes(self, probed: ev.Probed) -> None:
        from spark_tui.ui.widgets.nodes import NodeView

        self.views = []
        for node in probed.nodes:
            error = probed.errors.get(node.name)
            self.views.append(
                NodeView(
                    name=node.name,
                    state="error" if error else "reachable",
                    facts=None if error else node,
                    error=error[0] if error else None,
                    remedy=error[1] if error else None,
                )
            )
        self.query_one(NodePanel).show(self.views)
        self._refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        if not self.cluster and not self.busy:
            self._build_panes([(i, v.name) for i, v in enumerate(self.views)])

    # ---------------------------------------------------------------- recipes
    def _refresh_recipes(self, keep: str | None = None) -> None:
        from spark_tui.ui.widgets.recipes import RecipeRow

        rows = []
        for recipe in self.recipes:
            verdict = self.evaluate(recipe).verdict if self.nodes else None
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
        result = self.evaluate(recipe)
        panel.show_details(recipe, result.settings_shown)
        fit.border_title = f"Fit: {recipe.name}"
        fit.border_subtitle = "our running cluster's memory counted free" if result.credited else ""
        if not self.nodes:
            fit.show(None, "no reachable nodes yet: the fit check needs their memory")
        else:
            problem = (
                f"{result.problem.message}\n→ {result.problem.remedy}" if result.problem else None
            )
            fit.show(result.report.to_dict() if result.report else {}, problem)

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

    def _keys_hint(self, *actions: tuple[str, str, str]) -> str:
        """`t smoke · b bench`, with the keys as the config file maps them."""
        return " · ".join(f"{self._key_of(bid, key)} {what}" for bid, key, what in actions)

    # ----------------------------------------------------------------- launch
    def action_launch(self) -> None:
        recipe = self.selected
        if recipe is None:
            self.notify("pick a recipe first", severity="warning")
            return
        cluster = self.cluster
        if cluster and cluster.running:
            self.notify(
                f"cluster {cluster.cluster_id} is running: stop it first "
                f"({self._key_of('stop', 's')})",
                severity="warning",
            )
            return
        if self.busy:
            self.notify(f"busy: {self.busy}", severity="warning")
            return
        if not self.nodes:
            self.notify(
                "no reachable node yet: wait for discovery "
                f"({self._key_of('refresh', 'r')} refreshes)",
                severity="warning",
            )
            return
        result = self.evaluate(recipe)
        if result.problem or result.plan is None:
            problem = result.problem
            self._error(
                problem.message if problem else "no launch plan",
                problem.remedy if problem else "fix the recipe or the settings",
            )
            return
        self._launch(recipe, dict(self.sets.get(recipe.name, {})))

    def _new_cluster_panes(self, ranks: list[tuple[int, str]]) -> None:
        self._build_panes(ranks)
        self.query_one(ResultsBar).clear_results()
        self.last_compare = None

    @work(exclusive=True, group="follow", exit_on_error=False)
    async def _launch(self, recipe: Recipe, sets: dict[str, str]) -> None:
        """Start the ranks and follow them for as long as they run (logs keep coming)."""
        evaluation = self.evaluate(recipe, sets)
        if evaluation.plan is not None:
            self._new_cluster_panes([(r.rank, r.node) for r in evaluation.plan.ranks])
        self.busy = "launching"
        self._status(f"launching {recipe.name}…")
        await self._follow(self.session.launch(recipe, sets))

    async def _follow(self, events: AsyncIterator[Any]) -> None:
        try:
            await self.consume(events)
        except SparkError as exc:
            self._error(exc.message, exc.remedy)
            self._refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        finally:
            self.busy = None
            for pane in self.panes.values():
                pane.flush()

    def on_rank_changed(self, message: msg.RankChanged) -> None:
        self._rank_state(message.event)

    def _rank_state(self, event: ev.RankStateChanged) -> None:
        self._tab_label(event.rank, event.state.value)
        pane = self.panes.get(event.rank)
        if pane is None:
            return
        pane.flush()
        pane.set_state(event.state.value, event.progress)
        if event.state == ev.RankState.FAILED:
            pane.show_failure(event.reason or "failed", list(event.explaining_lines))
            # One toast per failure comes with the launch's error; the status says which rank.
            text = Text(
                f"rank {event.rank} on {event.node} {event.reason or 'failed'}", style="bold red"
            )
            text.append("  → the lines that explain it are at the top of its pane", style="")
            self._status(text)

    def on_cluster_up(self, message: msg.ClusterUp) -> None:
        self.busy = None if self.busy == "launching" else self.busy
        text = Text(f"cluster {message.event.cluster_id} ready ", style="bold green")
        hint = self._keys_hint(
            ("smoke", "t", "smoke"),
            ("bench", "b", "bench"),
            ("edit", "e", "edit a setting"),
            ("stop", "s", "stop"),
        )
        text.append(f"({hint})", style="dim")
        self._status(text)
        self._refresh_recipes(keep=self.query_one(RecipePanel).selected_name)

    def on_endpoint_known(self, message: msg.EndpointKnown) -> None:
        self.query_one(ResultsBar).set_endpoint(message.endpoint)

    def on_service_notice(self, message: msg.ServiceNotice) -> None:
        notice = message.notice
        if notice.level == "error":
            self._error(notice.message, notice.remedy)
        elif notice.level == "warning":
            text = notice.message + (f"\n→ {notice.remedy}" if notice.remedy else "")
            self.notify(text, severity="warning", timeout=8)
        elif not (self.cluster and self.cluster.ready) or self.busy:
            self._status(notice.message)

    async def _maybe_attach(self) -> None:
        try:
            found = await self.session.running()
        except SparkError:
            return
        if found is None or self.cluster is not None:
            return
        self._build_panes([(r.rank, r.node) for r in found.ranks])
        self._status(f"attached to running cluster {found.cluster_id} ({found.recipe})")
        self._attach(found)

    @work(exclusive=True, group="follow", exit_on_error=False)
    async def _attach(self, found: Any) -> None:
        await self._follow(self.session.attach(found))

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
        # The stop below removes the ranks: the launch it interrupts must not as well.
        self.session.keep_on_cancel = True
        self.workers.cancel_group(self, "follow")
        self.workers.cancel_group(self, "measure")
        self._status(f"stopping {cluster.cluster_id}…")
        try:
            await self.consume(self.session.stop(cluster.cluster_id))
        except SparkError as exc:
            self._error(exc.message, exc.remedy)
            return False
        finally:
            self.session.keep_on_cancel = False
        for rank, pane in self.panes.items():
            pane.flush()
            if pane.state != "failed":
                pane.set_state("stopped")
                self._tab_label(rank, "stopped")
        self._status(f"cluster {cluster.cluster_id} stopped: no container left on any node")
        self.query_one(ResultsBar).set_endpoint(None)
        self._refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        return True

    # ---------------------------------------------------------- smoke & bench
    def _ready_cluster(self) -> Cluster | None:
        cluster = self.cluster
        if cluster and cluster.ready and cluster.base_url:
            if self.busy:
                self.notify(f"busy: {self.busy}", severity="warning")
                return None
            return cluster
        self.notify(
            f"no ready cluster: launch one first ({self._key_of('launch', 'l')})",
            severity="warning",
        )
        return None

    def action_smoke(self) -> None:
        if self._ready_cluster():
            self._smoke()

    @work(exclusive=True, group="measure", exit_on_error=False)
    async def _smoke(self) -> None:
        self._status("running the smoke checks: health, models, chat, tool call, streaming…")
        await self.consume(self.session.smoke())

    def on_smoke_update(self, message: msg.SmokeUpdate) -> None:
        self.query_one(ResultsBar).set_smoke(message.results)
        if message.done is None:
            return
        self.last_smoke = message.results
        failed = [r["name"] for r in message.results if not r.get("ok")]
        if failed:
            self._status(Text(f"smoke checks failed: {', '.join(failed)}", style="bold red"))
        else:
            n = len(message.results)
            self._status(Text(f"smoke checks passed ({n}/{n})", style="bold green"))

    def action_bench(self) -> None:
        if self._ready_cluster():
            self._bench()

    @work(exclusive=True, group="measure", exit_on_error=False)
    async def _bench(self) -> None:
        config = self.session.bench_config
        self.busy = "benchmark"
        self._status(f"benchmark: concurrency {', '.join(map(str, config.concurrency))}…")
        try:
            await self.consume(self.session.bench())
        finally:
            self.busy = None

    def on_bench_update(self, message: msg.BenchUpdate) -> None:
        if message.progress:
            self._status(message.progress)
        if message.done is None:
            return
        self.last_bench = message.done
        self.query_one(ResultsBar).set_bench(message.levels)
        n = len(message.levels or [])
        again = self._key_of("bench", "b")
        self._status(
            Text(f"benchmark done: {n} concurrency levels ({again} runs it again)", style="bold")
        )

    # -------------------------------------------------------------- tuning
    def action_edit(self) -> None:
        from spark_tui.ui.views import editable_settings, preview_change

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
        sets = dict(cluster.overrides) if cluster and cluster.recipe == recipe.name else {}
        sets = sets or self.sets.get(recipe.name, {})
        keys, current = editable_settings(recipe, sets)

        def preview(key: str, value: str) -> tuple[str | None, Text]:
            return preview_change(recipe, sets, key, value, self.evaluate)

        def chosen(change: tuple[str, str] | None) -> None:
            if change:
                self._change(recipe, change)

        from spark_tui.ui.screens.edit import EditSettingDialog

        self.push_screen(EditSettingDialog(keys, current, preview, recipe=recipe.name), chosen)

    def _change(self, recipe: Recipe, change: tuple[str, str]) -> None:
        key, value = change
        cluster = self.cluster
        if not (cluster is not None and cluster.ready and cluster.recipe == recipe.name):
            # Nothing to compare against yet: remember the setting for the next launch.
            self.sets[recipe.name] = {**self.sets.get(recipe.name, {}), key: value}
            self._refresh_recipes(keep=recipe.name)
            self._status(
                f"{key}={value} set for {recipe.name}; press {self._key_of('launch', 'l')} "
                "to launch"
            )
            return
        self.sets[recipe.name] = {**cluster.overrides, key: value}
        self._tune(recipe, key, value)

    @work(exclusive=True, group="follow", exit_on_error=False)
    async def _tune(self, recipe: Recipe, key: str, value: str) -> None:
        """One change: the service stops, relaunches, checks, measures and compares; the
        relaunched cluster is then followed like a launch."""
        cluster = self.cluster
        if cluster is not None:
            self._new_cluster_panes(list(cluster.ranks))
        self.busy = "tuning"
        self._status(f"relaunching every rank with {key}={value}, then measuring…")
        await self._follow(self.session.tune(recipe, key, value))

    def on_tune_compared(self, message: msg.TuneCompared) -> None:
        from spark_tui.ui.views import comparison_text

        self.busy = None
        text = comparison_text(message.compared)
        self.last_compare = text
        self.query_one(ResultsBar).set_compare(text)
        change = message.compared.comparison.changed_text()
        self._status(Text(f"relaunched ({change}): compared with the baseline below", style="bold"))

    def action_reset_baseline(self) -> None:
        """Forget the picked baseline of the running recipe: the next change measures anew."""
        cluster = self.cluster
        recipe = cluster.recipe if cluster else (self.selected.name if self.selected else None)
        if recipe is None:
            self.notify("pick a recipe first", severity="warning")
            return
        gone = self.session.history.reset_baseline(recipe)
        self.notify(
            f"{recipe}: baseline reset ({', '.join(gone) or 'none was picked'}); the next "
            "change measures a new one first"
        )

    def action_history(self) -> None:
        from spark_tui.ui.views import describe_run, history_rows

        history = self.session.history
        try:
            runs = history_rows(history)
        except SparkError as exc:
            self._error(exc.message, exc.remedy)
            return
        from spark_tui.ui.screens.info import HistoryScreen

        def pin(run_id: str) -> str:
            try:
                run = history.pin_baseline(run_id)
            except SparkError as exc:
                return f"{exc.message} ({exc.remedy})"
            return f"{run.id} is now the baseline of {run.recipe} on this cluster"

        self.push_screen(HistoryScreen(runs, lambda rid: describe_run(history, rid), pin))

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
        self._filter_problem(event.value)

    def _filter_problem(self, text: str) -> None:
        """An invalid regular expression is said, and matched as plain text."""
        import re

        box = self._filter_box()
        try:
            re.compile(text)
        except re.error as exc:
            box.add_class("-invalid")
            box.tooltip = f"not a regular expression ({exc}): matching it as plain text"
            return
        box.remove_class("-invalid")
        box.tooltip = None

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
    async def action_quit(self) -> None:
        """Textual's own quit (the palette's Quit, ctrl+q) asks like q does."""
        self.action_quit_cockpit()

    def action_quit_cockpit(self) -> None:
        cluster = self.cluster
        if cluster is None or not cluster.running:
            self._exit_clean()
            return
        if self.session.simulated:
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

        self.push_screen(QuitDialog(cluster.cluster_id, self.session.reattach_hint), choose)

    @work(exclusive=True, group="stop", exit_on_error=False)
    async def _stop_and_exit(self) -> None:
        self.closing = True
        if await self._stop_now():
            self._exit_clean()
        else:
            self.closing = False

    @work(group="exit", exit_on_error=False)
    async def _exit_clean(self, leave: Cluster | None = None) -> None:
        self.closing = True
        self.session.keep_on_cancel = leave is not None
        self.workers.cancel_group(self, "follow")
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

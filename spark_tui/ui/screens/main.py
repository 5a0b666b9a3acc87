"""The cockpit's main screen: nodes, recipes, fit, one log pane per rank, the watch after
ready, smoke and tuning.

It runs the session's actions and routes their events, as messages (ui.messages), to the
widgets that render them; its own handlers keep the status line and the flow (what runs
next, what to ask). The App around it holds the themes, the keys and the quit flow."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.worker import Worker

from spark_tui.core.errors import SparkError
from spark_tui.core.timeouts import WATCH_INTERVAL_S
from spark_tui.service import events as ev
from spark_tui.ui import messages as msg
from spark_tui.ui.screens.dialogs import Dialog, HostKeyDialog, OutageDialog
from spark_tui.ui.widgets.filterbox import FilterBox
from spark_tui.ui.widgets.fitpanel import FitPanel
from spark_tui.ui.widgets.gauges import GaugesPanel
from spark_tui.ui.widgets.link import LinkPanel
from spark_tui.ui.widgets.nodes import NodePanel
from spark_tui.ui.widgets.rankpanes import RankPanes
from spark_tui.ui.widgets.raystate import RayStateChanged, RayStatePanel
from spark_tui.ui.widgets.recipes import RecipePanel
from spark_tui.ui.widgets.results import ResultsBar

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.recipe import Recipe
    from spark_tui.core.sweep_result import SweepResult
    from spark_tui.service.bench import BenchConfig
    from spark_tui.service.evaluate import Evaluation
    from spark_tui.service.session import Cluster, Session
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.screens.edit import Change
    from spark_tui.ui.widgets.logpane import LogPane
    from spark_tui.ui.widgets.sync import CockpitSync, SyncUpdated


REFRESH_SECONDS = 15.0


def _app_work(
    *, group: str
) -> Callable[[Callable[..., Coroutine[Any, Any, None]]], Callable[..., Worker[None]]]:
    """Like `@work(exclusive=True, exit_on_error=False)`, but the worker belongs to the App:
    the quit flow cancels the screen's launch and measurements by group, and a worker's
    error is shown by the App's handler."""

    def decorate(
        method: Callable[..., Coroutine[Any, Any, None]],
    ) -> Callable[..., Worker[None]]:
        @functools.wraps(method)
        def run(self: MainScreen, *args: Any, **kwargs: Any) -> Worker[None]:
            # The method itself, not its coroutine: a worker the app never starts (it is
            # closing, or a newer one of the group replaced it first) then leaves no
            # coroutine behind that was never awaited.
            return self.app.run_worker(
                functools.partial(method, self, *args, **kwargs),
                name=method.__name__,
                group=group,
                exclusive=True,
                exit_on_error=False,
            )

        return run

    return decorate


class MainScreen(Screen[None]):
    """The cockpit's one screen: its panels, its actions, the session's events as messages."""

    def __init__(
        self,
        session: Session,
        *,
        recipe: str | None = None,
        auto_refresh: bool = True,
        watch_interval: float = WATCH_INTERVAL_S,
        keep_failed: bool = False,
    ) -> None:
        super().__init__(id="_default")
        self.session = session
        self.initial_recipe = recipe
        self.periodic_refresh = auto_refresh
        self.watch_interval = watch_interval
        # When a rank fails: keep every rank for inspection (k toggles), else stop them all
        # and keep their last lines in the history, as headless `watch --keep-failed` does.
        self.keep_failed = keep_failed
        self.recipes: list[Recipe] = []
        self.sets: dict[str, dict[str, str]] = {}
        # The widgets the service's events go to (made here: they live as long as the screen).
        self.nodes_panel = NodePanel(id="nodes")
        self.rank_panes = RankPanes(id="logs")
        self.gauges = GaugesPanel(id="gauges")
        self.link_panel = LinkPanel(id="link")
        self.bar = ResultsBar(id="results")
        self.last_smoke: list[dict[str, Any]] | None = None
        self.last_bench: ev.BenchDone | None = None
        self.last_compare: Text | None = None
        self.last_compared: ev.Compared | None = None
        # The sweep running or last run (its rows so far), and the recipe it sweeps.
        self.last_sweep: SweepResult | None = None
        self.sweep_recipe: Recipe | None = None
        self.busy: str | None = None
        self.discovered = asyncio.Event()
        # Per node in an outage: how long it had lasted when the user was last asked.
        self.outage_asked: dict[str, float] = {}

    @functools.cached_property
    def syncer(self) -> CockpitSync:
        """The model and image syncs (made when first used: not for the first frame)."""
        from spark_tui.ui.widgets.sync import CockpitSync

        return CockpitSync(self)

    @property
    def spark(self) -> SparkApp:
        return cast("SparkApp", self.app)

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        title = Static(self._title_text(), id="title")
        if self.session.simulated:
            title.add_class("simulated")
        yield title
        with Horizontal(id="top"):
            yield self.nodes_panel
            yield RecipePanel(id="recipes")
            yield FitPanel(id="fit")
        yield self.rank_panes
        yield self.gauges
        yield self.link_panel
        yield self.bar
        yield Footer()

    def _title_text(self) -> Text:
        text = Text("spark-tui ", style="bold")
        text.append(self.session.label, style="bold" if self.session.simulated else "")
        return text

    @property
    def panes(self) -> dict[int, LogPane]:
        """The log pane of each rank shown, by rank."""
        return self.rank_panes.panes

    def on_mount(self) -> None:
        self.nodes_panel.show_message("discovering nodes…")
        # The first frame goes out before anything slow: recipes, fit checks, the nodes.
        self.call_after_refresh(self._after_first_frame)

    def _after_first_frame(self) -> None:
        from spark_tui.service.evaluate import load_recipes

        self.recipes = load_recipes(self._warn)
        # The gaps the fit panel and a launch find name the cockpit's sync, not the CLI's.
        self.session.sync_hint = self.syncer.remedy()
        self.refresh_recipes(keep=self.initial_recipe)
        self.query_one("#recipe-list", OptionList).focus()
        self.discover()

    def _warn(self, message: str) -> None:
        self.notify(message, severity="warning", timeout=8)

    # ------------------------------------------------------------------ nodes
    @property
    def nodes(self) -> list[NodeFacts]:
        """The reachable nodes' facts, as last probed."""
        return self.session.reachable

    @property
    def cluster(self) -> Cluster | None:
        """The cluster the session launched or attached to."""
        return self.session.cluster

    def evaluate(self, recipe: Recipe, sets: dict[str, str] | None = None) -> Evaluation:
        """The service's verdict on the nodes (our cluster's memory counted free)."""
        return self.session.evaluate(recipe, self.sets_of(recipe) if sets is None else sets)

    def sets_of(self, recipe: Recipe) -> dict[str, str]:
        """The settings changed from the recipe's: the running cluster's when it serves
        this recipe (its launch record's, else read back from what runs), else the ones
        set here for the next launch."""
        from spark_tui.service.evaluate import running_overrides

        cluster = self.cluster
        if cluster is not None and cluster.running and cluster.recipe == recipe.name:
            known = cluster.overrides or running_overrides(recipe, cluster.head_argv)
            return {k: str(v) for k, v in known.items()}
        return dict(self.sets.get(recipe.name, {}))

    async def consume(self, events: AsyncIterator[ev.ServiceEvent]) -> None:
        """Route a service action's events to the widgets; answer its questions in dialogs.
        Log lines go straight into their pane's buffer (written in batches on a timer)."""
        from spark_tui.service.logs import is_own_request

        smoke: list[dict[str, Any]] = []
        async for event in events:
            if self.syncer.take(event):
                continue
            match event:
                case ev.LogLine(rank=rank):
                    pane = self.panes.get(rank)
                    if pane is not None:
                        pane.push(event.text, event.kind, own=is_own_request(event))
                case ev.Question():
                    event.reply(await self._ask(event))
                case ev.SmokeChecked(result=result):
                    smoke.append(result.to_dict())
                    self._send(msg.SmokeUpdate(list(smoke), None), self.bar)
                case ev.SmokeDone(results=results):
                    smoke = [r.to_dict() for r in results]
                    self._send(msg.SmokeUpdate(smoke, event), self.bar)
                    smoke = []
                case ev.Recorded(error=error):
                    if error:
                        self._warn(error)
                case _:
                    self.route(event)

    def route(self, event: ev.ServiceEvent) -> None:
        """One event as a message to each widget that renders it, and to this screen."""
        bar, gauges, nodes = self.bar, self.gauges, self.nodes_panel
        match event:
            case ev.Probed():
                # Free memory is read by the probe and by the watch: the nodes panel and
                # the gauges show the latest reading, whichever took it.
                self._send(msg.NodesProbed(event), nodes, gauges)
            case ev.RankStateChanged(rank=rank):
                self._send(msg.RankChanged(event), *self._panes_of([rank]), self.rank_panes)
            case ev.ClusterReady():
                self._send(msg.ClusterUp(event))
            case ev.Endpoint():
                self._send(msg.EndpointKnown(event), bar)
            case ev.Notice():
                self._send(msg.ServiceNotice(event))
            case ev.NodeUnreachable(ranks=ranks):
                # The link is down, the ranks are not failed for it: a state, retried.
                self._send(msg.NodeOutage(event), nodes, *self._panes_of(ranks))
            case ev.NodeReachable(ranks=ranks):
                self._send(msg.NodeBack(event), nodes, *self._panes_of(ranks))
            case ev.BenchProgressed(progress=p):
                progress = (
                    f"benchmark: concurrency {p.concurrency} ({p.level_index + 1}/{p.levels}), "
                    f"{p.done}/{p.total} requests, {p.errors} errors, {p.elapsed_s:.0f} s"
                )
                self._send(msg.BenchUpdate(progress=progress))
            case ev.BenchDone(result=result):
                levels = [lv.to_dict() for lv in result.levels]
                self._send(msg.BenchUpdate(levels=levels, done=event), bar, self.link_panel)
            case ev.LinkSample():
                self._send(msg.LinkSampled(event), self.link_panel, screen=False)
            case ev.Compared():
                self._send(msg.TuneCompared(event), bar)
            case ev.SweepProgressed() | ev.SweepValueDone() | ev.SweepDone():
                self._sweep_event(event)
            case ev.Stopped():
                panes = [self.rank_panes, *self.panes.values()]
                self._send(
                    msg.ClusterStopped(event), bar, gauges, self.link_panel, *panes, screen=False
                )
            case ev.WatchAlert(rank=rank):
                alert = msg.RankAlert(event, self._alert_remedy())
                self._send(alert, gauges, *self._panes_of([rank]))
            case (
                ev.WatchStarted()
                | ev.ProbeResult()
                | ev.ServiceGauges()
                | ev.NodeMemory()
                | ev.ContainerStates()
                | ev.NodeNotAnswering()
            ):
                self._send(msg.WatchSampled(event), gauges, nodes, screen=False)
            case ev.RayClusterState():
                self._send(RayStateChanged(event), self._ray_panel(), screen=False)
            case _:
                pass  # the rest is consume's, or the sync view's (see CockpitSync.take)

    def _send(self, message: Message, *widgets: MessagePump, screen: bool = True) -> None:
        """`message` to each widget (a copy each: a message is handled once) and, unless
        `screen` is False, to this screen's own handler."""
        import copy

        targets = [*widgets, self] if screen else list(widgets)
        copies = [message] + [copy.copy(message) for _ in targets[1:]]
        for target, each in zip(targets, copies, strict=False):
            target.post_message(each)

    def _panes_of(self, ranks: Any) -> list[LogPane]:
        return [self.panes[r] for r in ranks if r in self.panes]

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
        self.app.push_screen(dialog, done)
        return await answer

    @_app_work(group="discover")
    async def discover(self) -> None:
        self.show_status("discovering nodes…")
        try:
            await self.session.start()
            await self.consume(self.session.discover())
        except SparkError as exc:
            self.nodes_panel.show_message(f"{exc.message}\n→ {exc.remedy}")
            self.show_error(exc.message, exc.remedy)
            return
        reachable = len(self.session.reachable)
        self.show_status(
            f"{reachable} of {len(self.session.facts)} nodes reachable; pick a recipe and "
            f"press {self._key_of('launch', 'l')}"
        )
        self.discovered.set()
        if self.periodic_refresh:
            self.set_interval(REFRESH_SECONDS, self.refresh_nodes)
        await self._maybe_attach()

    @_app_work(group="refresh")
    async def refresh_nodes(self) -> None:
        if self.busy:
            return  # probing during a launch or a benchmark would disturb the figures
        with contextlib.suppress(SparkError):  # the next refresh tries again
            await self.consume(self.session.probe())

    def action_refresh(self) -> None:
        self.refresh_nodes()

    def action_copy_tunnel(self) -> None:
        """The tunnel command to the clipboard, whole (the terminal's OSC 52: works over SSH)."""
        endpoint = self.bar.endpoint
        if endpoint is None:
            self.notify(
                "no cluster running, so no tunnel to copy: launch one first "
                f"({self._key_of('launch', 'l')})",
                severity="warning",
            )
            return
        self.app.copy_to_clipboard(endpoint.tunnel)
        self.notify(f"copied to the clipboard: {endpoint.tunnel}", timeout=6)

    def on_nodes_probed(self, message: msg.NodesProbed) -> None:
        # The node panel shows them; the recipes' verdicts and the idle panes follow.
        self.refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        idle = all(p.state == "idle" for p in self.panes.values())
        if not self.cluster and not self.busy and idle:
            # A stopped or failed cluster's panes stay, with its logs, until the next launch.
            self.build_panes([(i, n.name) for i, n in enumerate(message.probed.nodes)])
        self.prepare_verdicts(retry=True)

    @_app_work(group="prepare")
    async def prepare_verdicts(self, retry: bool = False) -> None:
        """Fetch the Hub's facts of models no node has, the selected recipe first, off the
        UI's thread; redraw when they arrive."""
        selected = self.selected
        recipes = sorted(self.recipes, key=lambda r: r is not selected)
        for recipe in recipes:
            if self.busy or not self.nodes:
                return  # a launch or a benchmark first: the next probe asks again
            try:
                # The Hub only: the image's flag check runs a throwaway container on
                # the head, which a launch does itself (and keeps for these verdicts).
                new = await self.session.prepare(
                    recipe, self.sets_of(recipe), retry=retry, flags=False
                )
            except SparkError:
                continue  # the verdict keeps saying what is missing
            if new:
                self.refresh_recipes(keep=self.query_one(RecipePanel).selected_name)

    # ---------------------------------------------------------------- recipes
    def refresh_recipes(self, keep: str | None = None) -> None:
        from spark_tui.service.recipe_nodes import nodes_needed
        from spark_tui.ui.widgets.recipes import RecipeRow

        rows = []
        for recipe in self.recipes:
            if not self.nodes:
                rows.append(RecipeRow(recipe))
                continue
            # The count the plan takes with the settings chosen here, as `recipes` says it.
            result = self.evaluate(recipe)
            needed = (
                len(result.plan.ranks)
                if result.plan
                else nodes_needed(recipe, result.settings or None)
            )
            rows.append(RecipeRow(recipe, result.verdict, needed))
        self.query_one(RecipePanel).set_rows(rows, keep=keep)
        self._show_selected()

    @property
    def selected(self) -> Recipe | None:
        name = self.query_one(RecipePanel).selected_name
        return next((r for r in self.recipes if r.listed_name == name), None)

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
            report = result.report.to_dict() if result.report else {}
            if report and result.plan is not None and result.plan.image_resolved is not None:
                report["image_resolved"] = result.plan.image_resolved.to_dict()
            fit.show(report, problem)

    # -------------------------------------------------------------- log panes
    def build_panes(self, ranks: list[tuple[int, str]]) -> None:
        self.rank_panes.build(ranks)

    def show_status(self, text: str | Text) -> None:
        self.bar.set_status(text)

    def show_error(self, message: str, remedy: str | None) -> None:
        text = Text(message, style="bold red")
        if remedy:
            text.append(f"  → {remedy}", style="")
        self.show_status(text)
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
        # A running cluster of ours is the service's question (stop it and launch this
        # one?), asked once the launch has its verdict.
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
            self.show_error(
                problem.message if problem else "no launch plan",
                problem.remedy if problem else "fix the recipe or the settings",
            )
            return
        self._launch(recipe, self.sets_of(recipe))

    def _new_cluster_panes(self, ranks: list[tuple[int, str]]) -> None:
        self._ray_clear()
        self.build_panes(ranks)
        self.bar.clear_results()
        self.gauges.clear()
        self.link_panel.clear()
        self.last_compare = None
        self.last_compared = None

    @_app_work(group="follow")
    async def _launch(self, recipe: Recipe, sets: dict[str, str]) -> None:
        """Start the ranks and follow them for as long as they run (logs keep coming)."""
        running = self.cluster if self.cluster is not None and self.cluster.running else None
        evaluation = self.evaluate(recipe, sets)
        if evaluation.plan is not None:
            self._new_cluster_panes([(r.rank, r.node) for r in evaluation.plan.ranks])
        self.busy = "launching"
        self.show_status(f"launching {recipe.name}…")
        await self._follow(self.session.launch(recipe, sets, keep_failed=self.keep_failed))
        if running is not None and self.cluster is running:
            # The user kept the running cluster (or the fit check refused the new one):
            # follow it again.
            await self._follow_running()

    async def _follow_running(self) -> None:
        try:
            found = await self.session.running()
        except SparkError:
            return
        if found is not None:
            self.build_panes([(r.rank, r.node) for r in found.ranks])
            await self._follow(self.session.attach(found, keep_failed=self.keep_failed))

    async def _follow(self, events: AsyncIterator[ev.ServiceEvent]) -> None:
        # What this follow is busy with: a follow replaced by the next action (a launch's
        # by a sweep's) ends after that action has said what it is busy with.
        busy = self.busy
        try:
            await self.consume(events)
        except SparkError as exc:
            cluster = self.cluster
            # Its ranks kept for inspection: what to do next is the cockpit's keys.
            kept = cluster is not None and cluster.failed and cluster.running
            self.show_error(exc.message, self._alert_remedy() if kept else exc.remedy)
            self.refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        finally:
            if self.busy == busy:
                self.busy = None
            # Nothing follows the cluster any more (failed, or the user stopped watching).
            self.workers.cancel_group(self.app, "watch")
            for pane in self.panes.values():
                pane.flush()

    def on_endpoint_known(self, message: msg.EndpointKnown) -> None:
        # A cluster launched or attached to is now the session's: the verdicts count its
        # memory as a replacing launch gets it back, and show the settings it runs with.
        self.refresh_recipes(keep=self.query_one(RecipePanel).selected_name)

    def on_rank_changed(self, message: msg.RankChanged) -> None:
        # The rank's pane shows its state and failure, its tab the state; here the status.
        event = message.event
        if event.state == ev.RankState.FAILED:
            # The launch's watch owns this failure (it stops the other ranks): the watch
            # after ready, which would see them go, ends now.
            self.workers.cancel_group(self.app, "watch")
            # One toast per failure comes with the launch's error; the status says which rank.
            text = Text(
                f"rank {event.rank} on {event.node} {event.reason or 'failed'}", style="bold red"
            )
            text.append("  → the lines that explain it are at the top of its pane", style="")
            self.show_status(text)

    def on_cluster_up(self, message: msg.ClusterUp) -> None:
        self.busy = None if self.busy == "launching" else self.busy
        if self.busy in ("sweep", "ending the sweep"):
            # A value relaunched: the sweep says where it is, and no watch's requests may
            # disturb the value's benchmark.
            return
        text = Text(f"cluster {message.event.cluster_id} ready ", style="bold green")
        hint = self._keys_hint(
            ("smoke", "t", "smoke"),
            ("bench", "b", "bench"),
            ("edit", "e", "edit a setting"),
            ("stop", "s", "stop"),
        )
        text.append(f"({hint})", style="dim")
        self.show_status(text)
        self.refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        self._watch(message.event.cluster_id)

    # ------------------------------------------------------------------ watch
    @_app_work(group="watch")
    async def _watch(self, cluster_id: str) -> None:
        """The watch after ready: its samples fill the gauges panel until the cluster is
        stopped, relaunched or fails (an alert names the rank and shows its lines)."""
        try:
            await self.consume(
                self.session.watch(
                    cluster_id, interval=self.watch_interval, keep_failed=self.keep_failed
                )
            )
        except SparkError as exc:
            ended = msg.WatchEnded(f"{exc.message} → {exc.remedy}")
            self._send(ended, self.gauges, screen=False)

    def _alert_remedy(self) -> str:
        cluster = self.cluster
        if cluster is not None and cluster.running:
            return (
                "the ranks are kept for inspection: read their logs, stop them "
                f"({self._key_of('stop', 's')}), fix the cause, then launch again "
                f"({self._key_of('launch', 'l')})"
            )
        return (
            "every rank was stopped and removed, their last lines kept in the history "
            f"({self._key_of('history', 'h')}); fix the cause the lines say, then launch "
            f"again ({self._key_of('launch', 'l')})"
        )

    def action_keep_failed(self) -> None:
        """Toggle what happens to the ranks when one fails (kept, or stopped and removed)."""
        self.keep_failed = not self.keep_failed
        if self.keep_failed:
            said = "when a rank fails, every rank is kept for inspection (you stop them)"
        else:
            said = "when a rank fails, every rank is stopped, its last lines kept in the history"
        running = self.cluster is not None and self.cluster.running
        later = " (from the next launch: the running one follows the setting it started with)"
        self.notify(said + (later if running else ""), timeout=6)

    def on_rank_alert(self, message: msg.RankAlert) -> None:
        alert = message.alert
        # The gauges panel shows why (the lines); here which rank and what to do.
        text = Text(f"rank {alert.rank} on {alert.node} failed", style="bold red")
        text.append(f"  → {message.remedy}", style="")
        self.show_status(text)

    # ---------------------------------------------------------------- outages
    def on_node_outage(self, message: msg.NodeOutage) -> None:
        """A long outage is the user's to decide: keep waiting, or stop watching."""
        event = message.event
        asked = self.outage_asked.get(event.node)
        if not event.ask or (asked is not None and (asked < 0 or event.seconds < 2 * asked)):
            return
        self.outage_asked[event.node] = -1.0  # a dialog is open

        def answer(stop: bool | None) -> None:
            if stop:
                event.give_up()
            self.outage_asked[event.node] = event.seconds  # asked again after as long

        self.app.push_screen(OutageDialog(event), answer)

    def on_node_back(self, message: msg.NodeBack) -> None:
        event = message.event
        self.outage_asked.pop(event.node, None)
        self.show_status(f"{event.node} reachable again after {event.outage_seconds:.0f} s")

    def _ray_panel(self) -> RayStatePanel:
        """The Ray cluster's line above the logs, made when a Ray launch first reports."""
        found = self.query(RayStatePanel)
        if found:
            return found.first(RayStatePanel)
        panel = RayStatePanel(id="raystate")
        self.mount(panel, before=self.query_one("#logs"))
        return panel

    def _ray_clear(self) -> None:
        """Hide the Ray cluster's line (a new launch, a stop) until the next report."""
        for panel in self.query(RayStatePanel):
            panel.clear()

    def on_service_notice(self, message: msg.ServiceNotice) -> None:
        notice = message.notice
        if notice.level == "error":
            self.show_error(notice.message, notice.remedy)
        elif notice.level == "warning":
            text = notice.message + (f"\n→ {notice.remedy}" if notice.remedy else "")
            self.notify(text, severity="warning", timeout=8)
        elif not (self.cluster and self.cluster.ready) or self.busy:
            self.show_status(notice.message)

    async def _maybe_attach(self) -> None:
        try:
            found = await self.session.running()
        except SparkError:
            return
        if found is None or self.cluster is not None:
            return
        self.build_panes([(r.rank, r.node) for r in found.ranks])
        self.show_status(f"attached to running cluster {found.cluster_id} ({found.recipe})")
        self._attach_to(found)

    @_app_work(group="follow")
    async def _attach_to(self, found: Any) -> None:
        await self._follow(self.session.attach(found, keep_failed=self.keep_failed))

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

        self.app.push_screen(Dialog("Stop the cluster", body, yes="Stop"), answer)

    @_app_work(group="stop")
    async def _stop(self) -> None:
        await self.stop_now()

    async def stop_now(self) -> bool:
        cluster = self.cluster
        if cluster is None:
            return True
        # The stop below removes the ranks: the launch it interrupts must not as well.
        self.session.keep_on_cancel = True
        for group in ("watch", "follow", "measure"):
            self.workers.cancel_group(self.app, group)
        self.show_status(f"stopping {cluster.cluster_id}…")
        try:
            await self.consume(self.session.stop(cluster.cluster_id))
        except SparkError as exc:
            self.show_error(exc.message, exc.remedy)
            return False
        finally:
            self.session.keep_on_cancel = False
        self._ray_clear()
        self.show_status(f"cluster {cluster.cluster_id} stopped: no container left on any node")
        # The last probe still sees the stopped cluster's memory in use (and no cluster
        # left to credit it to): the verdicts follow the nodes as they are now.
        with contextlib.suppress(SparkError):
            await self.consume(self.session.probe())
        self.refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        return True

    # ------------------------------------------------------------------- sync
    def action_sync(self) -> None:
        self.syncer.action(self.selected)

    def on_sync_updated(self, message: SyncUpdated) -> None:
        self.syncer.updated(message.event)

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

    @_app_work(group="measure")
    async def _smoke(self) -> None:
        self.show_status("running the smoke checks: health, models, chat, tool call, streaming…")
        await self.consume(self.session.smoke())

    def on_smoke_update(self, message: msg.SmokeUpdate) -> None:
        if message.done is None:
            return
        self.last_smoke = message.results
        failed = [r["name"] for r in message.results if not r.get("ok")]
        if failed:
            self.show_status(Text(f"smoke checks failed: {', '.join(failed)}", style="bold red"))
        else:
            n = len(message.results)
            self.show_status(Text(f"smoke checks passed ({n}/{n})", style="bold green"))

    def action_bench(self) -> None:
        """The bench dialog with this session's settings; Enter runs the benchmark."""
        if not self._ready_cluster():
            return
        from spark_tui.service.bench import BenchSettings
        from spark_tui.ui.screens.bench import BenchDialog

        def chosen(config: BenchConfig | None) -> None:
            if config is not None:
                self.session.bench_config = config
                self._bench()

        self.app.push_screen(BenchDialog(BenchSettings.of(self.session.bench_config)), chosen)

    @_app_work(group="measure")
    async def _bench(self) -> None:
        config = self.session.bench_config
        self.busy = "benchmark"
        # Like the node refresh, the watch waits: its requests would disturb the figures,
        # and a saturated engine's slow answer is no hang.
        self.workers.cancel_group(self.app, "watch")
        self._send(msg.WatchEnded("paused while the benchmark runs"), self.gauges, screen=False)
        self.show_status(f"benchmark: concurrency {', '.join(map(str, config.concurrency))}…")
        try:
            await self.consume(self.session.bench())
        finally:
            self.busy = None
            cluster = self.cluster
            if cluster is not None and cluster.ready and cluster.running:
                self._watch(cluster.cluster_id)

    def on_bench_update(self, message: msg.BenchUpdate) -> None:
        if message.progress:
            self.show_status(message.progress)
        if message.done is None:
            return
        self.last_bench = message.done
        self.last_compared = None
        n = len(message.levels or [])
        again, full = self._key_of("bench", "b"), self._key_of("results", "v")
        self.show_status(
            Text(
                f"benchmark done: {n} levels below ({full} every figure, {again} again)",
                style="bold",
            )
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
        sets = self.sets_of(recipe)
        keys, current = editable_settings(recipe, sets)

        def preview(key: str, value: str) -> tuple[str | None, Text]:
            return preview_change(recipe, sets, key, value, self.evaluate)

        def chosen(change: Change | None) -> None:
            if change is None:
                return
            if change.sweep:
                self._start_sweep(recipe, change)
            else:
                self._change(recipe, (change.key, change.value))

        from spark_tui.ui.screens.edit import EditSettingDialog

        self.app.push_screen(EditSettingDialog(keys, current, preview, recipe=recipe.name), chosen)

    def _change(self, recipe: Recipe, change: tuple[str, str]) -> None:
        key, value = change
        cluster = self.cluster
        if not (cluster is not None and cluster.ready and cluster.recipe == recipe.name):
            # Nothing to compare against yet: remember the setting for the next launch.
            self.sets[recipe.name] = {**self.sets.get(recipe.name, {}), key: value}
            self.refresh_recipes(keep=recipe.listed_name)
            self.prepare_verdicts()
            self.show_status(
                f"{key}={value} set for {recipe.name}; press {self._key_of('launch', 'l')} "
                "to launch"
            )
            return
        self.sets[recipe.name] = {**self.sets_of(recipe), key: value}
        self._tune(recipe, key, value)

    @_app_work(group="follow")
    async def _tune(self, recipe: Recipe, key: str, value: str) -> None:
        """One change: the service stops, relaunches, checks, measures and compares; the
        relaunched cluster is then followed like a launch."""
        cluster = self.cluster
        self.workers.cancel_group(self.app, "watch")  # the relaunched cluster gets its own
        if cluster is not None:
            self._new_cluster_panes(list(cluster.ranks))
        self.busy = "tuning"
        self.show_status(f"relaunching every rank with {key}={value}, then measuring…")
        await self._follow(self.session.tune(recipe, key, value))

    def on_tune_compared(self, message: msg.TuneCompared) -> None:
        from spark_tui.ui.views import comparison_text

        self.busy = None
        self.last_compare = comparison_text(message.compared)
        self.last_compared = message.compared
        change = message.compared.comparison.changed_text()
        full = self._key_of("results", "v")
        self.show_status(
            Text(
                f"relaunched ({change}): compared with the baseline below ({full} every figure)",
                style="bold",
            )
        )

    def action_results(self) -> None:
        """The last benchmark and comparison in full (a view that scrolls)."""
        from spark_tui.ui.screens.info import ResultsScreen
        from spark_tui.ui.views import bench_view

        self.app.push_screen(ResultsScreen(bench_view(self.last_bench, self.last_compared)))

    # -------------------------------------------------------------- sweeps
    def _start_sweep(self, recipe: Recipe, change: Change) -> None:
        cluster = self.cluster
        if not (cluster is not None and cluster.ready and cluster.recipe == recipe.name):
            self.notify(
                f"a sweep measures a running {recipe.name}: launch it first "
                f"({self._key_of('launch', 'l')})",
                severity="warning",
            )
            return
        from spark_tui.core.errors import InputError
        from spark_tui.core.sweep import Objective, Target

        try:
            targets = [Target.parse(t) for t in change.targets]
            objective = Objective.parse(change.objective) if change.objective else None
        except InputError as exc:
            self.show_error(exc.message, exc.remedy)
            return
        self._sweep(recipe, change.key, change.values, targets, objective)

    @_app_work(group="follow")
    async def _sweep(
        self,
        recipe: Recipe,
        key: str,
        values: list[str],
        targets: list[Any],
        objective: Any,
    ) -> None:
        """Each value in turn (the service's sweep); the result opens when it is done. Esc
        while it runs asks what to leave running."""
        cluster = self.cluster
        self.workers.cancel_group(self.app, "watch")
        if cluster is not None:
            self._new_cluster_panes(list(cluster.ranks))
        self.busy = "sweep"
        self.sweep_recipe = recipe
        self.last_sweep = None
        self.show_status(f"sweep of {key}: {', '.join(values)} (Esc ends it)…")

        def keep(result: SweepResult) -> None:
            self.last_sweep = result

        try:
            await self._follow(
                self.session.sweep(recipe, key, values, targets, objective, on_result=keep)
            )
            if self.last_sweep is not None and self.last_sweep.done:
                text = Text(f"sweep done: {self.last_sweep.best_text()} ", style="bold")
                text.append(f"({self._key_of('sweep', 'w')} shows its table)", style="dim")
                self.show_status(text)
        finally:
            self.busy = None
            running = self.cluster
            if running is not None and running.ready and running.running:
                self._watch(running.cluster_id)

    def _sweep_event(self, event: ev.SweepEvent) -> None:
        from spark_tui.ui.screens.sweep import SweepScreen

        match event:
            case ev.SweepProgressed(done=done, total=total, value=value, phase=phase):
                eta = "" if event.eta_s is None else f" · about {event.eta_s / 60:.0f} min left"
                if event.eta_s is not None and event.eta_s < 120:
                    eta = f" · about {event.eta_s:.0f} s left"
                what = "" if value is None else f" · {value}: {phase}"
                if value is None:
                    what = f" · {phase}"
                self.show_status(f"sweep {done}/{total} done{what}{eta} (Esc ends it)")
            case ev.SweepValueDone(result=result):
                self.last_sweep = result
                if isinstance(self.app.screen, SweepScreen):
                    self.app.screen.show(result)
            case ev.SweepDone(result=result):
                self.last_sweep = result
                self.show_status(Text(f"sweep done: {result.best_text()}", style="bold"))
                if isinstance(self.app.screen, SweepScreen):
                    self.app.screen.show(result)
                else:
                    self.app.push_screen(SweepScreen(result))

    def end_sweep(self) -> None:
        """Esc while a sweep runs: what to leave running, or go on."""
        from spark_tui.ui.screens.sweep import LeaveSweepDialog

        result, recipe = self.last_sweep, self.sweep_recipe
        if result is None or recipe is None:
            self.notify("the sweep is measuring its baseline; Esc again once a value is done")
            return

        def chosen(choice: str | None) -> None:
            if choice and choice != "continue":
                self.workers.cancel_group(self.app, "follow")
                self._leave_sweep(recipe, result, choice)

        self.app.push_screen(LeaveSweepDialog(result), chosen)

    @_app_work(group="follow")
    async def _leave_sweep(self, recipe: Recipe, result: SweepResult, choice: str) -> None:
        from spark_tui.ui.screens.sweep import SweepScreen

        self.busy = "ending the sweep"
        self.show_status(f"sweep ended: leaving {choice} running…")
        result.interrupted = True
        await self._follow(self.session.leave_after_sweep(recipe, result, choice))
        self.show_status(Text(f"sweep ended ({choice} left running)", style="bold"))
        self.app.push_screen(SweepScreen(result))
        running = self.cluster
        if running is not None and running.ready and running.running:
            self._watch(running.cluster_id)

    def action_sweep_result(self) -> None:
        """The last sweep's table and chart (also while it runs)."""
        from spark_tui.ui.screens.sweep import SweepScreen

        if self.last_sweep is None:
            self.notify("no sweep yet: e, then values with commas (4,8,16)", severity="warning")
            return
        self.app.push_screen(SweepScreen(self.last_sweep))

    def action_reset_baseline(self) -> None:
        """Forget the picked baseline of the running recipe: the next change measures anew."""
        cluster = self.cluster
        recipe = cluster.recipe if cluster else (self.selected.name if self.selected else None)
        if recipe is None:
            self.notify("pick a recipe first", severity="warning")
            return
        from spark_tui.service.history import RunHistory

        gone = RunHistory(self.session.history).reset_baseline(recipe)
        self.notify(
            f"{recipe}: baseline reset ({', '.join(gone) or 'none was picked'}); the next "
            "change measures a new one first"
        )

    def action_history(self) -> None:
        from spark_tui.service.history import RunHistory
        from spark_tui.ui.views import describe_run, history_rows

        history = RunHistory(self.session.history)
        try:
            runs = history_rows(history)
        except SparkError as exc:
            self.show_error(exc.message, exc.remedy)
            return
        from spark_tui.ui.screens.info import HistoryScreen

        self.app.push_screen(
            HistoryScreen(runs, lambda rid: describe_run(history, rid), history.pin_message)
        )

    # ------------------------------------------------------- filter & views
    def action_filter(self) -> None:
        focused = self.app.focused
        recipes = self.query_one(RecipePanel)
        box = self._filter_box()
        if focused is not None and recipes in focused.ancestors_with_self:
            box.show_for(
                "recipes",
                recipes.filter_text,
                recipes.set_filter,
                lambda: self.query_one("#recipe-list"),
            )
            return
        first = next(iter(self.panes.values()), None)
        box.show_for(
            "logs",
            first.filter_text if first else "",
            self.rank_panes.set_filter,
            lambda: first.query_one("RankLog") if first and first.is_attached else None,
        )

    def _filter_box(self) -> FilterBox:
        """The filter line, made on first use (the first frame does without it)."""
        found = self.query(FilterBox)
        if found:
            return found.first()
        box = FilterBox(id="filter")
        self.mount(box, before=self.query_one(Footer))
        return box

    def action_back(self) -> None:
        found = self.query(FilterBox)
        if self.busy == "sweep" and not (found and found.first().is_open):
            self.end_sweep()
            return
        if found and found.first().is_open:
            found.first().close(clear=True)
        elif self.app.screen.maximized is not None:
            self.app.screen.minimize()

    def action_fullscreen(self) -> None:
        if self.app.screen.maximized is not None:
            self.app.screen.minimize()
            return
        pane = self.rank_panes.current(self.app.focused)
        if pane is not None:
            self.app.screen.maximize(pane, container=False)
            pane.query_one("RankLog").focus()

    def action_compact(self) -> None:
        compact = self.rank_panes.toggle_compact()
        self.notify("log lines: " + ("compact" if compact else "full (with prefixes)"))

    def _key_of(self, binding_id: str, fallback: str) -> str:
        """The key that runs a binding now (the config file may have remapped it)."""
        return self.spark.key_of(binding_id, fallback)

    def action_help(self) -> None:
        from spark_tui.ui.screens.info import HelpScreen

        self.app.push_screen(HelpScreen.for_bindings(self.app.BINDINGS, self._key_of))

"""The cockpit's main screen: nodes, recipes, fit, one log pane per rank, the results bar.

It runs the session's actions, whose events ui.routing sends, as messages (ui.messages), to
the widgets that render them; its own handlers keep the status line. What each key starts
(launch and follow, stop, smoke and bench, tuning, sweeps, the history, the log views)
lives in spark_tui.ui.flows. The App around it holds the themes, the keys and the quit
flow."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static

from spark_tui.core.errors import SparkError
from spark_tui.core.timeouts import WATCH_INTERVAL_S
from spark_tui.ui.widgets.fitpanel import FitPanel
from spark_tui.ui.widgets.gauges import GaugesPanel
from spark_tui.ui.widgets.link import LinkPanel
from spark_tui.ui.widgets.nodes import NodePanel
from spark_tui.ui.widgets.rankpanes import RankPanes
from spark_tui.ui.widgets.recipes import RecipePanel
from spark_tui.ui.widgets.results import ResultsBar
from spark_tui.ui.workers import app_work

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.recipe import Recipe
    from spark_tui.core.sweep_result import SweepResult
    from spark_tui.service import events as ev
    from spark_tui.service.evaluate import Evaluation
    from spark_tui.service.session import Cluster, Session
    from spark_tui.ui import messages as msg
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.widgets.logpane import LogPane
    from spark_tui.ui.widgets.sync import CockpitSync, SyncUpdated


REFRESH_SECONDS = 15.0


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
        # The tune relaunching (its recipe) and the cluster it stopped for it, if it has.
        self.tune_recipe: Recipe | None = None
        self.tune_replaced: ev.TuneReplaced | None = None
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

    def _title_text(self) -> RenderableType:
        text = Text("spark-tui ", style="bold", no_wrap=True, overflow="ellipsis")
        text.append(self.session.label, style="bold" if self.session.simulated else "")
        switch = self._clusters_text()
        if switch is None:
            return text
        from rich.table import Table

        # Several services side by side: which one the keys act on, and how to choose.
        row = Table.grid(expand=True)
        row.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        row.add_column(no_wrap=True, justify="right")
        row.add_row(text, switch)
        return row

    def _clusters_text(self) -> Text | None:
        """`cluster 51c069dc 2/2 · n next`, when more than one cluster of ours runs."""
        seen = self.session.clusters_seen()
        if len(seen) < 2:
            return None
        ids = [c.cluster_id for c in seen]
        chosen = self.cluster.cluster_id if self.cluster is not None else self.session.chosen
        text = Text(" cluster ", style="dim")
        if chosen in ids:
            text.append(chosen, style="bold")
            text.append(f" {ids.index(chosen) + 1}/{len(ids)}")
        else:
            text.append(f"none of {len(ids)}")
        text.append(f" · {self.key_of('next_cluster', 'n')} next", style="dim")
        return text

    def refresh_title(self) -> None:
        """The title line again (our clusters side by side may have changed)."""
        self.query_one("#title", Static).update(self._title_text())

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

        self.recipes = load_recipes(self.warn)
        # The gaps the fit panel and a launch find name the cockpit's sync, not the CLI's.
        self.session.sync_hint = self.syncer.remedy()
        self.refresh_recipes(keep=self.initial_recipe)
        self.query_one("#recipe-list", OptionList).focus()
        self.discover()

    def warn(self, message: str) -> None:
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
        """Route a service action's events to the widgets; answer its questions in dialogs
        (see spark_tui.ui.routing, loaded with the first action: not for the first frame)."""
        from spark_tui.ui.routing import consume

        await consume(self, events)

    def route(self, event: ev.ServiceEvent) -> None:
        """One event as a message to each widget that renders it, and to this screen."""
        from spark_tui.ui.routing import route

        route(self, event)

    def send(self, message: Message, *widgets: MessagePump, screen: bool = True) -> None:
        """`message` to each widget (a copy each: a message is handled once) and, unless
        `screen` is False, to this screen's own handler."""
        import copy

        targets = [*widgets, self] if screen else list(widgets)
        copies = [message] + [copy.copy(message) for _ in targets[1:]]
        for target, each in zip(targets, copies, strict=False):
            target.post_message(each)

    @app_work(group="discover")
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
            f"press {self.key_of('launch', 'l')}"
        )
        self.discovered.set()
        self.load_launch_code()
        if self.periodic_refresh:
            self.set_interval(REFRESH_SECONDS, self.refresh_nodes)
        await self.attach_running()

    @app_work(group="load")
    async def load_launch_code(self) -> None:
        """While the user picks a recipe: the launch key then starts containers, not
        imports (see Session.load_launch)."""
        await self.session.load_launch()

    @app_work(group="refresh")
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
                f"({self.key_of('launch', 'l')})",
                severity="warning",
            )
            return
        self.app.copy_to_clipboard(endpoint.tunnel)
        self.notify(f"copied to the clipboard: {endpoint.tunnel}", timeout=6)

    def on_nodes_probed(self, message: msg.NodesProbed) -> None:
        # The node panel shows them; the recipes' verdicts, the idle panes and the clusters
        # of ours side by side (the title) follow.
        self.refresh_title()
        self.refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        idle = all(p.state == "idle" for p in self.panes.values())
        if not self.cluster and not self.busy and idle:
            # A stopped or failed cluster's panes stay, with its logs, until the next launch.
            names = self.session.on or [n.name for n in message.probed.nodes]
            self.build_panes(list(enumerate(names)))
        self.prepare_verdicts(retry=True)

    def on_node_panel_picked(self, message: NodePanel.Picked) -> None:
        """The nodes picked in the panel are the ones the verdicts, the plan and the next
        launch are about (the first picked is the head)."""
        names = message.names
        self.session.on = names or None
        self.refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        idle = all(p.state == "idle" for p in self.panes.values())
        if not self.cluster and not self.busy and idle:
            self.build_panes(list(enumerate(names or [n.name for n in self.session.facts])))
        if names:
            self.show_status(f"next launch on {', '.join(names)} ({names[0]} the head)")
        else:
            self.show_status("no node picked: the next launch takes the first nodes it needs")

    @app_work(group="prepare")
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

    def keys_hint(self, *actions: tuple[str, str, str]) -> str:
        """`t smoke · b bench`, with the keys as the config file maps them."""
        return " · ".join(f"{self.key_of(bid, key)} {what}" for bid, key, what in actions)

    # ------------------------------------------------------------------ flows
    # Each key's flow is a module of spark_tui.ui.flows, imported when the key is first
    # pressed: the first frame then compiles none of them (see that package).
    def action_launch(self) -> None:
        from spark_tui.ui.flows.launch import launch

        launch(self)

    def on_endpoint_known(self, message: msg.EndpointKnown) -> None:
        # A cluster launched or attached to is now the session's: the verdicts count its
        # memory as a replacing launch gets it back, and show the settings it runs with.
        self.refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        self.refresh_title()

    def on_rank_changed(self, message: msg.RankChanged) -> None:
        # The rank's pane shows its state and failure, its tab the state; here the status.
        from spark_tui.ui.flows.launch import rank_changed

        rank_changed(self, message)

    def on_cluster_up(self, message: msg.ClusterUp) -> None:
        from spark_tui.ui.flows.launch import cluster_up

        cluster_up(self, message)

    def action_keep_failed(self) -> None:
        """Toggle what happens to the ranks when one fails (kept, or stopped and removed)."""
        from spark_tui.ui.flows.launch import toggle_keep_failed

        toggle_keep_failed(self)

    def on_rank_alert(self, message: msg.RankAlert) -> None:
        from spark_tui.ui.flows.launch import rank_alert

        rank_alert(self, message)

    # ---------------------------------------------------------------- outages
    def on_node_outage(self, message: msg.NodeOutage) -> None:
        """A long outage is the user's to decide: keep waiting, or stop watching."""
        from spark_tui.ui.screens.dialogs import OutageDialog

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

    def ray_clear(self) -> None:
        """Hide the Ray cluster's line (a new launch, a stop) until the next report."""
        from spark_tui.ui.widgets.raystate import RayStatePanel

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

    async def attach_running(self) -> None:
        """Follow the cluster of ours that runs on the nodes, when none is followed yet:
        the chosen one, else the only one, else (services side by side) the first by id,
        the title saying which and how to choose another."""
        seen = self.session.clusters_seen()
        if len(seen) > 1 and self.session.chosen not in [c.cluster_id for c in seen]:
            self.session.chosen = seen[0].cluster_id
        try:
            found = await self.session.running()
        except SparkError:
            return
        if found is None or self.cluster is not None:
            return
        from spark_tui.ui.flows.launch import attach

        self.build_panes([(r.rank, r.node) for r in found.ranks])
        text = f"attached to running cluster {found.cluster_id} ({found.recipe})"
        if len(seen) > 1:
            text += (
                f"; {len(seen) - 1} more of ours beside it: "
                f"{self.key_of('next_cluster', 'n')} shows the next"
            )
        self.show_status(text)
        self.refresh_title()
        attach(self, found)

    def action_next_cluster(self) -> None:
        """Follow the next of our clusters running side by side (the keys act on it)."""
        from spark_tui.ui.flows.clusters import next_cluster

        next_cluster(self)

    # ------------------------------------------------------------------- stop
    def action_stop(self) -> None:
        from spark_tui.ui.flows.stop import ask_stop

        ask_stop(self)

    async def stop_now(self) -> bool:
        """Stop the cluster now; False if the stop failed (the error is shown)."""
        from spark_tui.ui.flows.stop import stop_now

        return await stop_now(self)

    # ------------------------------------------------------------------- sync
    def action_sync(self) -> None:
        self.syncer.action(self.selected)

    def on_sync_updated(self, message: SyncUpdated) -> None:
        self.syncer.updated(message.event)

    # ---------------------------------------------------------- smoke & bench
    def action_smoke(self) -> None:
        from spark_tui.ui.flows.measure import smoke

        smoke(self)

    def on_smoke_update(self, message: msg.SmokeUpdate) -> None:
        from spark_tui.ui.flows.measure import smoke_updated

        smoke_updated(self, message)

    def action_bench(self) -> None:
        """The bench dialog with this session's settings; Enter runs the benchmark."""
        from spark_tui.ui.flows.measure import bench

        bench(self)

    def on_bench_update(self, message: msg.BenchUpdate) -> None:
        from spark_tui.ui.flows.measure import bench_updated

        bench_updated(self, message)

    # ------------------------------------------------------------ tuning & sweeps
    def action_edit(self) -> None:
        from spark_tui.ui.flows.tune import edit

        edit(self)

    def on_tune_compared(self, message: msg.TuneCompared) -> None:
        from spark_tui.ui.flows.tune import compared

        compared(self, message)

    def action_results(self) -> None:
        """The last benchmark and comparison in full (a view that scrolls)."""
        from spark_tui.ui.flows.tune import show_results

        show_results(self)

    def end_sweep(self) -> None:
        """Esc while a sweep runs: what to leave running, or go on."""
        from spark_tui.ui.flows.sweep import end_sweep

        end_sweep(self)

    def action_sweep_result(self) -> None:
        """The last sweep's table and chart (also while it runs)."""
        from spark_tui.ui.flows.sweep import show_sweep_result

        show_sweep_result(self)

    # ---------------------------------------------------------------- history
    def action_reset_baseline(self) -> None:
        """Forget the picked baseline of the running recipe: the next change measures anew."""
        from spark_tui.ui.flows.history import reset_baseline

        reset_baseline(self)

    def action_history(self) -> None:
        from spark_tui.ui.flows.history import show_history

        show_history(self)

    # ------------------------------------------------------- filter & views
    def action_filter(self) -> None:
        from spark_tui.ui.flows.logview import open_filter

        open_filter(self)

    def action_back(self) -> None:
        from spark_tui.ui.widgets.filterbox import FilterBox

        found = self.query(FilterBox)
        if self.busy == "sweep" and not (found and found.first().is_open):
            self.end_sweep()
            return
        if self.busy == "tuning" and not (found and found.first().is_open):
            from spark_tui.ui.flows.tune import end_tune

            end_tune(self)
            return
        if found and found.first().is_open:
            found.first().close(clear=True)
        elif self.app.screen.maximized is not None:
            self.app.screen.minimize()

    def action_fullscreen(self) -> None:
        from spark_tui.ui.flows.logview import toggle_fullscreen

        toggle_fullscreen(self)

    def action_compact(self) -> None:
        from spark_tui.ui.flows.logview import toggle_compact

        toggle_compact(self)

    def key_of(self, binding_id: str, fallback: str) -> str:
        """The key that runs a binding now (the config file may have remapped it)."""
        return self.spark.key_of(binding_id, fallback)

    def action_help(self) -> None:
        from spark_tui.ui.screens.info import HelpScreen

        self.app.push_screen(HelpScreen.for_bindings(self.app.BINDINGS, self.key_of))

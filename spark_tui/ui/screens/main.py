"""The cockpit's main screen: nodes, recipes, fit, one log pane per rank, smoke and tuning.

It runs the session's actions and turns their events into messages; the App around it holds
the themes, the keys and the quit flow."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Input, OptionList, Static
from textual.worker import Worker

from spark_tui.core.errors import SparkError
from spark_tui.ops.events import RayClusterState
from spark_tui.service import events as ev
from spark_tui.ui import messages as msg
from spark_tui.ui.screens.dialogs import Dialog, HostKeyDialog
from spark_tui.ui.widgets.fitpanel import FitPanel
from spark_tui.ui.widgets.logpane import LogPane
from spark_tui.ui.widgets.nodes import NodePanel
from spark_tui.ui.widgets.raystate import RayStateChanged, RayStatePanel
from spark_tui.ui.widgets.recipes import RecipePanel
from spark_tui.ui.widgets.results import ResultsBar
from spark_tui.ui.widgets.sync import CockpitSync, SyncUpdated

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.recipe import Recipe
    from spark_tui.service.evaluate import Evaluation
    from spark_tui.service.session import Cluster, Session
    from spark_tui.ui.app import SparkApp
    from spark_tui.ui.widgets.nodes import NodeView


# Side by side up to this many ranks; tabs beyond.
SIDE_BY_SIDE = 2
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
            return self.app.run_worker(
                method(self, *args, **kwargs),
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
    ) -> None:
        super().__init__(id="_default")
        self.session = session
        self.initial_recipe = recipe
        self.periodic_refresh = auto_refresh
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
        self.syncer = CockpitSync(self)

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

    def on_mount(self) -> None:
        self.query_one(NodePanel).show_message("discovering nodes…")
        # The first frame goes out before anything slow: recipes, fit checks, the nodes.
        self.call_after_refresh(self._after_first_frame)

    def _after_first_frame(self) -> None:
        from spark_tui.service.evaluate import load_recipes

        self.recipes = load_recipes(self._warn)
        self._refresh_recipes(keep=self.initial_recipe)
        self.query_one("#recipe-list", OptionList).focus()
        self.discover()

    def _warn(self, message: str) -> None:
        self.notify(message, severity="warning", timeout=8)

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
            if self.syncer.take(event):
                continue
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
            elif isinstance(event, RayClusterState):
                self._ray_panel().post_message(RayStateChanged(event))
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
        self.app.push_screen(dialog, done)
        return await answer

    @_app_work(group="discover")
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

    @_app_work(group="refresh")
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
            self.syncer.gaps(recipe, result)
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
        self._ray_clear()
        self._build_panes(ranks)
        self.query_one(ResultsBar).clear_results()
        self.last_compare = None

    @_app_work(group="follow")
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
        self._attach_to(found)

    @_app_work(group="follow")
    async def _attach_to(self, found: Any) -> None:
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

        self.app.push_screen(Dialog("Stop the cluster", body, yes="Stop"), answer)

    @_app_work(group="stop")
    async def _stop(self) -> None:
        await self._stop_now()

    async def _stop_now(self) -> bool:
        cluster = self.cluster
        if cluster is None:
            return True
        # The stop below removes the ranks: the launch it interrupts must not as well.
        self.session.keep_on_cancel = True
        self.workers.cancel_group(self.app, "follow")
        self.workers.cancel_group(self.app, "measure")
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
        self._ray_clear()
        self._status(f"cluster {cluster.cluster_id} stopped: no container left on any node")
        self.query_one(ResultsBar).set_endpoint(None)
        self._refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
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

    @_app_work(group="measure")
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

        self.app.push_screen(EditSettingDialog(keys, current, preview, recipe=recipe.name), chosen)

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

    @_app_work(group="follow")
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

        self.app.push_screen(HistoryScreen(runs, lambda rid: describe_run(history, rid), pin))

    # ------------------------------------------------------- filter & views
    def action_filter(self) -> None:
        focused = self.app.focused
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
        elif self.app.screen.maximized is not None:
            self.app.screen.minimize()

    def action_fullscreen(self) -> None:
        if self.app.screen.maximized is not None:
            self.app.screen.minimize()
            return
        focused = self.app.focused
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
            self.app.screen.maximize(pane, container=False)
            pane.query_one("RankLog").focus()

    def action_compact(self) -> None:
        compact = not all(p.compact for p in self.panes.values())
        for pane in self.panes.values():
            pane.compact = compact
        self.notify("log lines: " + ("compact" if compact else "full (with prefixes)"))

    def _key_of(self, binding_id: str, fallback: str) -> str:
        """The key that runs a binding now (the config file may have remapped it)."""
        return self.spark.key_of(binding_id, fallback)

    def action_help(self) -> None:
        rows = [
            (self._key_of(b.id or "", b.key), b.description)
            for b in self.app.BINDINGS
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

        self.app.push_screen(HelpScreen(rows, notes))

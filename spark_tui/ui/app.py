"""The cockpit: nodes, recipes, fit, one log pane per rank, smoke and tuning in one screen."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal
from textual.widgets import Footer, Input, OptionList, Static, TabbedContent, TabPane

from spark_tui.core.errors import SparkError
from spark_tui.core.facts import NodeFacts
from spark_tui.core.recipe import Recipe
from spark_tui.ops.events import ClusterReady, LogLine, Notice, RankState, RankStateChanged
from spark_tui.ui import actions
from spark_tui.ui.backend import Backend, NodeProbe
from spark_tui.ui.config import CockpitConfig
from spark_tui.ui.palette import CockpitCommands
from spark_tui.ui.screens.dialogs import Dialog, HostKeyDialog, QuitDialog
from spark_tui.ui.screens.edit import EditSettingDialog
from spark_tui.ui.screens.info import HelpScreen, HistoryScreen
from spark_tui.ui.themes import DEFAULT_THEME, NO_COLOR_THEME, load_themes
from spark_tui.ui.widgets.fitpanel import FitPanel
from spark_tui.ui.widgets.logpane import LogPane
from spark_tui.ui.widgets.nodes import NodePanel, NodeView
from spark_tui.ui.widgets.recipes import RecipePanel, RecipeRow
from spark_tui.ui.widgets.results import ResultsBar

# Side by side up to this many ranks; tabs beyond.
SIDE_BY_SIDE = 2
REFRESH_SECONDS = 15.0


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


class SparkApp(App[int]):
    """The spark-tui cockpit."""

    TITLE = "spark-tui"
    COMMANDS = App.COMMANDS | {CockpitCommands}
    CSS = """
    Screen { layout: vertical; }
    #title { height: 1; padding: 0 1; background: $panel; color: $text; }
    #title.simulated { background: $accent 30%; }
    #top { height: 11; }
    #top > NodePanel { width: 1fr; }
    #top > RecipePanel { width: 1fr; }
    #top > FitPanel { width: 1fr; }
    #logs { height: 1fr; min-height: 5; }
    #logs > Horizontal { height: 1fr; }
    #logs TabbedContent { height: 1fr; }
    #filter { dock: bottom; display: none; height: 3; }
    #filter.visible { display: block; }
    """
    BINDINGS = [  # noqa: RUF012
        Binding("l", "launch", "launch", id="launch"),
        Binding("s", "stop", "stop", id="stop"),
        Binding("t", "smoke", "smoke", id="smoke"),
        Binding("b", "bench", "bench", id="bench"),
        Binding("e", "edit", "edit setting", id="edit"),
        Binding("h", "history", "history", id="history"),
        Binding("slash", "filter", "filter", id="filter"),
        Binding("f", "fullscreen", "full screen", id="fullscreen", show=False),
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
    ) -> None:
        super().__init__()
        self.backend = backend
        self.config = config or CockpitConfig()
        self.initial_recipe = recipe
        self.requested_theme = theme or self.config.theme
        self.periodic_refresh = auto_refresh
        self.bench_levels = bench_levels or [1, 4, 8]
        self.views: list[NodeView] = []
        self.recipes: list[Recipe] = []
        self.sets: dict[str, dict[str, str]] = {}
        self.verdicts: dict[str, str] = {}
        self.cluster: ClusterView | None = None
        self.panes: dict[int, LogPane] = {}
        self.last_smoke: list[dict[str, Any]] | None = None
        self.last_bench: dict[str, Any] | None = None
        self.busy: str | None = None
        self.filter_target: str = "logs"

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
        yield Input(placeholder="filter (regex); Enter keeps it, Esc clears", id="filter")
        yield Footer()

    def _title_text(self) -> Text:
        text = Text("spark-tui ", style="bold")
        text.append(self.backend.label, style="bold yellow" if self.backend.simulated else "")
        return text

    async def on_mount(self) -> None:
        themes, problems = load_themes()
        for theme in themes:
            self.register_theme(theme)
        wanted = self.requested_theme or (
            NO_COLOR_THEME if os.environ.get("NO_COLOR") else DEFAULT_THEME
        )
        names = {t.name for t in themes} | set(self.available_themes)
        if wanted not in names:
            problems.append(f"unknown theme {wanted!r}; known: {', '.join(sorted(names))}")
            wanted = DEFAULT_THEME
        self.theme = wanted
        if self.config.keys:
            self.set_keymap(self.config.keys)
        for problem in problems:
            self.notify(problem, severity="warning", timeout=8)
        self.recipes = actions.load_recipes(self._warn)
        self._refresh_recipes(keep=self.initial_recipe)
        self.query_one("#recipe-list", OptionList).focus()
        self.discover()

    def _warn(self, message: str) -> None:
        self.notify(message, severity="warning", timeout=8)

    # ------------------------------------------------------------------ nodes
    @property
    def nodes(self) -> list[NodeFacts]:
        return [v.facts for v in self.views if v.facts is not None]

    @work(exclusive=True, group="discover")
    async def discover(self) -> None:
        self._status("discovering nodes…")
        try:
            await self.backend.start()
            probes = await self.backend.discover(self._confirm_host_key)
        except SparkError as exc:
            self._error(exc.message, exc.remedy)
            return
        self._show_probes(probes)
        reachable = len(self.nodes)
        self._status(f"{reachable} of {len(probes)} nodes reachable; pick a recipe and press l")
        if self.periodic_refresh:
            self.set_interval(REFRESH_SECONDS, self.refresh_nodes)
        await self._maybe_attach()

    async def _confirm_host_key(self, host: str, fingerprint: str) -> bool:
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.push_screen(HostKeyDialog(host, fingerprint), lambda ok: answer.set_result(bool(ok)))
        return await answer

    @work(exclusive=True, group="refresh")
    async def refresh_nodes(self) -> None:
        try:
            probes = await self.backend.refresh()
        except SparkError:
            return  # the next refresh tries again; the panel keeps the last facts
        self._show_probes(probes)

    def action_refresh(self) -> None:
        self.refresh_nodes()

    def _show_probes(self, probes: list[NodeProbe]) -> None:
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
        self._refresh_recipes(keep=self.query_one(RecipePanel).selected_name)
        if not self.cluster:
            self._build_panes([(i, v.name) for i, v in enumerate(self.views)])

    # ---------------------------------------------------------------- recipes
    def _refresh_recipes(self, keep: str | None = None) -> None:
        nodes = self.nodes
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
        result = actions.evaluate(recipe, self.sets.get(recipe.name, {}), self.nodes)
        panel.show_details(recipe, result.settings_shown)
        fit.border_title = f"Fit: {recipe.name}"
        if not self.nodes:
            fit.show(None, "no reachable nodes yet: the fit check needs their memory")
        else:
            fit.show(result.report, result.problem)

    # -------------------------------------------------------------- log panes
    def _build_panes(self, ranks: list[tuple[int, str]]) -> None:
        logs = self.query_one("#logs", Container)
        logs.remove_children()
        self.panes = {rank: LogPane(rank, node) for rank, node in ranks}
        if len(ranks) <= SIDE_BY_SIDE:
            logs.mount(Horizontal(*self.panes.values()))
        else:
            tabs = TabbedContent()
            logs.mount(tabs)
            for rank, pane in self.panes.items():
                tabs.add_pane(TabPane(f"rank {rank}", pane, id=f"tab-{rank}"))

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
        if self.cluster and not self.cluster.failed:
            self.notify(
                f"cluster {self.cluster.cluster_id} is running: stop it first (s)",
                severity="warning",
            )
            return
        if self.busy:
            self.notify(f"busy: {self.busy}", severity="warning")
            return
        result = actions.evaluate(recipe, self.sets.get(recipe.name, {}), self.nodes)
        if result.problem or result.plan is None:
            self._error(result.problem or "no plan", "fix the recipe or the settings (e)")
            return
        if result.verdict in ("does_not_fit", "unknown"):
            reasons = "\n".join(
                f"• {f['message']}" for f in result.report["findings"] if f["severity"] == "error"
            ) or "• facts are missing: " + ", ".join(
                f["message"] for f in result.report["findings"]
            )
            verdict = "does not fit" if result.verdict == "does_not_fit" else "cannot be checked"
            body = Text(f"{recipe.name} {verdict} on these nodes:\n{reasons}\n\n")
            body.append("vLLM will most likely fail at startup. Launch anyway?", style="bold")

            def insist(yes: bool | None) -> None:
                if yes:
                    self.run_launch(recipe, dict(self.sets.get(recipe.name, {})))

            self.push_screen(
                Dialog("Launch refused by the fit check", body, yes="Launch anyway"), insist
            )
            return
        self.run_launch(recipe, dict(self.sets.get(recipe.name, {})))

    def run_launch(self, recipe: Recipe, sets: dict[str, str]) -> None:
        self._launch(recipe, sets)

    @work(exclusive=True, group="cluster")
    async def _launch(self, recipe: Recipe, sets: dict[str, str]) -> None:
        await self._launch_and_wait(recipe, sets)

    async def _launch_and_wait(self, recipe: Recipe, sets: dict[str, str]) -> bool:
        result = actions.evaluate(recipe, sets, self.nodes)
        plan = result.plan
        if plan is None:
            self._error(result.problem or "no plan", "fix the settings")
            return False
        self.cluster = ClusterView(plan.cluster_id, recipe.name, sets, model=result.served_model)
        self.busy = "launching"
        self._build_panes([(r.rank, r.node) for r in plan.ranks])
        self.query_one(ResultsBar).set_smoke(None)
        self._status(f"launching {recipe.name} as cluster {plan.cluster_id}…")
        try:
            await self._follow(self.backend.launch(plan))
        except SparkError as exc:
            self.cluster.failed = True
            self._error(exc.message, exc.remedy)
        finally:
            self.busy = None
        if self.cluster and self.cluster.ready:
            self.cluster.launch_run = actions.record_launch(plan, recipe, sets)
        return bool(self.cluster and self.cluster.ready)

    async def _follow(self, events: Any) -> None:
        cluster = self.cluster
        assert cluster is not None
        async for event in events:
            if isinstance(event, LogLine):
                pane = self.panes.get(event.rank)
                if pane is not None:
                    pane.push(event.text)
            elif isinstance(event, RankStateChanged):
                self._rank_state(event)
            elif isinstance(event, ClusterReady):
                cluster.base_url = event.base_url
                cluster.ready = True
                text = Text(f"cluster {event.cluster_id} ready ", style="bold green")
                text.append(f"at {event.base_url}  (t smoke, b bench, e edit a setting)")
                self._status(text)
            elif isinstance(event, Notice):
                severity = {"error": "error", "warning": "warning"}.get(event.level, "information")
                message = event.message + (f"\n→ {event.remedy}" if event.remedy else "")
                self.notify(message, severity=severity, timeout=8)  # type: ignore[arg-type]
                if event.level == "error":
                    self._error(event.message, event.remedy)

    def _rank_state(self, event: RankStateChanged) -> None:
        cluster = self.cluster
        pane = self.panes.get(event.rank)
        if cluster is not None:
            cluster.states[event.rank] = event.state.value
        if pane is None:
            return
        pane.flush()
        pane.set_state(event.state.value, event.progress)
        if event.state == RankState.FAILED:
            pane.show_failure(event.reason or "failed", list(event.explaining_lines))
            if cluster is not None:
                cluster.failed = True
                cluster.ready = False
            self._error(
                f"rank {event.rank} on {event.node} failed: {event.reason or ''}",
                "read the lines shown in its pane; the other ranks were stopped",
            )

    async def _maybe_attach(self) -> None:
        try:
            running = await self.backend.running()
        except SparkError:
            return
        if running is None or self.cluster is not None:
            return
        self.cluster = ClusterView(running.cluster_id, running.recipe, {})
        self._build_panes([(r["rank"], r["node"]) for r in running.ranks])
        self._status(f"attached to running cluster {running.cluster_id} ({running.recipe})")
        self._attach(running.cluster_id)

    @work(exclusive=True, group="cluster")
    async def _attach(self, cluster_id: str) -> None:
        try:
            await self._follow(self.backend.attach(cluster_id))
        except SparkError as exc:
            self._error(exc.message, exc.remedy)

    # ------------------------------------------------------------------- stop
    def action_stop(self) -> None:
        cluster = self.cluster
        if cluster is None:
            self.notify("nothing to stop: no cluster of ours is running", severity="information")
            return
        body = Text(f"Stop cluster {cluster.cluster_id} ({cluster.recipe})?\n")
        body.append("Every rank's container on every node is stopped and removed.")

        def answer(yes: bool | None) -> None:
            if yes:
                self._stop()

        self.push_screen(Dialog("Stop the cluster", body, yes="Stop"), answer)

    @work(exclusive=True, group="stop")
    async def _stop(self) -> None:
        await self._stop_now()

    async def _stop_now(self) -> bool:
        cluster = self.cluster
        if cluster is None:
            return True
        self.workers.cancel_group(self, "cluster")
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
        for pane in self.panes.values():
            pane.set_state("stopped")
        self._status(f"cluster {cluster.cluster_id} stopped: no container left on any node")
        self.cluster = None
        return True

    # ---------------------------------------------------------- smoke & bench
    def _ready_cluster(self) -> ClusterView | None:
        if self.cluster and self.cluster.ready and self.cluster.base_url:
            return self.cluster
        self.notify("no ready cluster: launch one first (l)", severity="warning")
        return None

    def action_smoke(self) -> None:
        if self._ready_cluster():
            self._smoke()

    @work(exclusive=True, group="smoke")
    async def _smoke(self) -> list[dict[str, Any]]:
        cluster = self.cluster
        assert cluster is not None and cluster.base_url
        self._status("running smoke checks: health, models, chat, tool call, streaming…")
        results = await self.backend.smoke(cluster.base_url, cluster.model)
        self.last_smoke = results
        self.query_one(ResultsBar).set_smoke(results)
        ok = all(r.get("ok") for r in results)
        self._status(
            Text(
                "smoke checks passed" if ok else "smoke checks failed",
                style="bold green" if ok else "bold red",
            )
        )
        actions.record_smoke(
            cluster.cluster_id, cluster.recipe, cluster.sets, results, cluster.base_url
        )
        return results

    def action_bench(self) -> None:
        if self._ready_cluster():
            self._bench()

    @work(exclusive=True, group="bench")
    async def _bench(self) -> dict[str, Any]:
        return await self._bench_now()

    async def _bench_now(self) -> dict[str, Any]:
        cluster = self.cluster
        assert cluster is not None and cluster.base_url
        self.busy = "benchmark"
        try:
            result = await self.backend.bench(
                cluster.base_url, cluster.model, self.bench_levels, self._status
            )
        finally:
            self.busy = None
        self.last_bench = result
        self.query_one(ResultsBar).set_bench(result.get("levels"), note="  (b: again)")
        self._status("benchmark done")
        run = actions.record_bench(cluster.cluster_id, cluster.recipe, cluster.sets, result)
        result["run"] = run
        result["sets"] = dict(cluster.sets)
        return result

    # -------------------------------------------------------------- tuning
    def action_edit(self) -> None:
        recipe = self.selected
        if recipe is None:
            return
        sets = self.sets.get(recipe.name, {})
        keys, current = actions.editable_settings(recipe, sets)

        def preview(key: str, value: str) -> tuple[str | None, Text]:
            return actions.preview_change(recipe, sets, key, value, self.nodes)

        def chosen(change: tuple[str, str] | None) -> None:
            if change:
                self._tune(recipe, change)

        self.push_screen(EditSettingDialog(keys, current, preview), chosen)

    @work(exclusive=True, group="cluster")
    async def _tune(self, recipe: Recipe, change: tuple[str, str]) -> None:
        key, value = change
        old_sets = dict(self.sets.get(recipe.name, {}))
        new_sets = {**old_sets, key: value}
        running = self.cluster and self.cluster.ready and self.cluster.recipe == recipe.name
        if not running:
            # Nothing to compare against yet: just remember the setting for the next launch.
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
            return
        smoke = await self._smoke().wait()
        after = await self._bench_now()
        baseline_run = actions.baseline_run(before.get("run"))
        if baseline_run is not None and after.get("run") is not None:
            text = actions.comparison_text(baseline_run, after["run"], smoke)
            self.query_one(ResultsBar).set_compare(text)
        self._status(f"relaunched with {key}={value}: comparison with the baseline below")

    def action_history(self) -> None:
        runs = actions.history_rows()
        self.push_screen(HistoryScreen(runs, actions.describe_run))

    # ------------------------------------------------------- filter & views
    def action_filter(self) -> None:
        focused = self.focused
        in_recipes = focused is not None and any(
            isinstance(node, RecipePanel) for node in focused.ancestors_with_self
        )
        self.filter_target = "recipes" if in_recipes else "logs"
        box = self.query_one("#filter", Input)
        box.value = (
            self.query_one(RecipePanel).filter_text
            if in_recipes
            else next(iter(self.panes.values())).filter_text
            if self.panes
            else ""
        )
        box.placeholder = f"filter {self.filter_target} (regex); Enter keeps it, Esc clears"
        box.add_class("visible")
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if self.filter_target == "recipes":
            self.query_one(RecipePanel).set_filter(event.value)
        else:
            for pane in self.panes.values():
                pane.filter_text = event.value

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.query_one("#filter", Input).remove_class("visible")
        target = "#recipe-list" if self.filter_target == "recipes" else None
        if target:
            self.query_one(target).focus()
        elif self.panes:
            next(iter(self.panes.values())).query_one("RankLog").focus()

    def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_class("visible"):
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
            next(iter(self.panes.values()), None),
        )
        if pane is not None:
            self.screen.maximize(pane, container=False)

    def action_help(self) -> None:
        rows = [
            (b.key_display or b.key, b.description) for b in self.BINDINGS if isinstance(b, Binding)
        ]
        rows += [("ctrl+p", "command palette: every action, themes"), ("tab", "next panel")]
        notes = (
            "Keys can be remapped in the config file (keys: {launch: f5}).\n"
            "The fit check runs before every launch; l refuses a recipe that does not fit\n"
            "unless you insist. Quitting with a cluster running asks whether to stop it."
        )
        self.push_screen(HelpScreen(rows, notes))

    # ------------------------------------------------------------------ quit
    def action_quit_cockpit(self) -> None:
        cluster = self.cluster
        if cluster is None:
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
                self._exit_clean()

        self.push_screen(QuitDialog(cluster.cluster_id, self.backend.reattach_hint), choose)

    @work(exclusive=True, group="stop")
    async def _stop_and_exit(self) -> None:
        if await self._stop_now():
            self._exit_clean()

    @work(group="exit")
    async def _exit_clean(self) -> None:
        try:
            await self.backend.close()
        finally:
            self.exit(0)

"""The cockpit on a recorded demo launch (ReplaySession): every screen and key, fast."""

from __future__ import annotations

from cockpit_helpers import head_text, plain, results_text, settle, static_text, wait_until
from cockpit_replay import ReplaySession
from replay_app import discovered, launched_ready, replay_app
from textual.widgets import Button, Input, OptionList

from spark_tui.ops.events import RankState, RankStateChanged
from spark_tui.ui.screens.dialogs import Dialog
from spark_tui.ui.screens.edit import EditSettingDialog
from spark_tui.ui.screens.info import HistoryScreen

SIZE = (160, 48)


async def test_nodes_recipes_badges_and_fit_after_discovery() -> None:
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        nodes = static_text(app, "#nodes")
        assert "sim-spark-1" in nodes and "sim-spark-2" in nodes
        assert "GB10" in nodes and "200G" in nodes and "cached models" in nodes
        olist = app.query_one("#recipe-list", OptionList)
        rows = [plain(olist.get_option_at_index(i).prompt) for i in range(olist.option_count)]
        assert any(r.startswith("fits") and "glm-5.3-flash" in r for r in rows)
        # a one-node recipe on two nodes runs on the first one (core's node subsets)
        assert any("gpt-oss-120b" in r for r in rows)
        assert app.selected is not None and app.selected.name == "glm-5.3-flash"
        fit = static_text(app, "#fit-body")
        assert fit.lstrip().startswith("fits") and "TP2 x PP1 x DP1" in fit
        details = static_text(app, "#recipe-details")
        assert "2 nodes" in details and "GLM-5.3" in details
        # picking another recipe updates details and fit
        await pilot.press("down")
        await pilot.pause(0.05)
        assert app.selected.name == "gpt-oss-120b"
        fit = static_text(app, "#fit-body")
        # one node of the two runs it; the panel says which is left out
        assert fit.lstrip().startswith("fits") and "= 1 of 2 nodes" in fit
        assert "left out: sim-spark-2" in fit


async def test_slash_filters_the_recipe_list_and_escape_clears() -> None:
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        await pilot.press("slash")
        assert app.focused is app.query_one("#filter", Input)
        await pilot.press(*"qwen")
        await pilot.pause(0.05)
        olist = app.query_one("#recipe-list", OptionList)
        names = [olist.get_option_at_index(i).id for i in range(olist.option_count)]
        assert names and all("qwen" in n for n in names)
        await pilot.press("enter")
        assert app.focused is olist and app.selected.name.startswith("qwen")
        await pilot.press("slash", "escape")
        await pilot.pause(0.05)
        assert olist.option_count == len(app.recipes)


async def test_launch_refused_when_it_does_not_fit_unless_the_user_insists() -> None:
    backend = ReplaySession()
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        app.sets["glm-5.3-flash"] = {"gpu_memory_utilization": "0.4"}
        app.refresh_recipes(keep="glm-5.3-flash")
        assert "does not fit" in static_text(app, "#fit-body")
        await pilot.press("l")
        await pilot.pause(0.05)
        assert isinstance(app.screen, Dialog)
        body = plain(app.screen.body)
        assert "does not fit" in body and "weights need" in body and "→" in body
        await pilot.press("n")
        await pilot.pause(0.05)
        assert not any(c.startswith("launch") for c in backend.nodes.calls)
        said = results_text(app)
        assert "not launching glm-5.3-flash: it does not fit" in said, said
        assert "launching anyway was declined" in said, said
        await pilot.press("l")
        await pilot.pause(0.05)
        await pilot.press("y")
        await wait_until(
            pilot, lambda: any(c.startswith("launch") for c in backend.nodes.calls), 5, "launch"
        )


async def test_launch_shows_loading_progress_then_ready_smoke_and_bench() -> None:
    seen: list[str] = []

    def freeze(event: object) -> bool:
        return (
            isinstance(event, RankStateChanged)
            and event.state is RankState.LOADING
            and (event.progress or 0) >= 0.5
            and not seen
        )

    backend = ReplaySession(freeze_when=freeze)
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        await pilot.press("l")
        await wait_until(
            pilot,
            lambda: (
                app.panes
                and any(
                    p.state == "loading" and (p.progress or 0) >= 0.5 for p in app.panes.values()
                )
            ),
            10,
            "loading past 50%",
        )
        await settle(pilot)
        head = head_text(app, 0) + head_text(app, 1)
        assert "loading" in head and "%" in head and "━" in head
        assert "launching glm-5.3-flash" in results_text(app) or "started" in results_text(app)
        # let the replay go on to ready: an interrupted launch removes what it started
        seen.append("go")
        app.workers.cancel_group(app, "follow")
        await wait_until(pilot, lambda: backend.nodes.stopped, 5, "the interrupted launch removed")
        backend.freeze_when = None
        await pilot.press("l")
        await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 10, "ready")
        await settle(pilot)
        assert "ready" in head_text(app, 0) and "ready" in head_text(app, 1)
        assert "Application startup complete" in "\n".join(app.panes[0].lines)
        await pilot.press("t")
        await wait_until(pilot, lambda: app.last_smoke is not None, 5, "smoke")
        await settle(pilot)
        text = results_text(app)
        assert "smoke checks passed (5/5)" in text
        for name in ("health", "models", "chat", "tool_call", "streaming"):
            assert f"✓ {name}" in text
        await pilot.press("b")
        await pilot.press("enter")  # the bench dialog: run with its settings
        await wait_until(pilot, lambda: app.last_bench is not None, 5, "bench")
        await settle(pilot)
        text = results_text(app)
        assert "bench c1" in text and "c8" in text and "tok/s" in text and "█" in text


async def test_a_failed_rank_shows_why_and_the_other_rank_is_not_left_running() -> None:
    app = replay_app(ReplaySession(scenario="failed_launch"))
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        await pilot.press("l")
        await wait_until(pilot, lambda: app.cluster and app.cluster.failed, 10, "failure")
        await wait_until(pilot, lambda: app.busy is None, 10, "settled")
        await settle(pilot)
        failed = app.panes[1]
        assert failed.has_class("failed") and failed.state == "failed"
        why = static_text(app, "#why-1")
        assert "rank 1 on sim-spark-2 failed" in why and "code 137" in why
        assert failed.explaining  # the lines that explain it are shown
        assert app.panes[0].state in ("failed", "stopped")
        assert "NCCL" in static_text(app, "#why-0") or "died" in static_text(app, "#why-0")
        assert "rank 1 on sim-spark-2" in results_text(app)
        # the failed cluster holds nothing: quitting does not ask
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 5, "exit")


async def test_stop_asks_first_then_removes_every_rank() -> None:
    backend = ReplaySession()
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        await pilot.press("s")
        assert isinstance(app.screen, Dialog)
        await pilot.press("n")
        await pilot.pause(0.05)
        assert backend.nodes.stopped == [] and app.cluster is not None
        await pilot.press("s")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.cluster is None, 5, "stopped")
        assert backend.nodes.stopped == [app.panes and next(iter(backend.nodes.stopped))]
        assert all(p.state == "stopped" for p in app.panes.values())
        assert "no container left" in results_text(app)


async def test_edit_modal_validates_and_previews_the_fit() -> None:
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        await pilot.press("e")
        await pilot.pause(0.05)
        assert isinstance(app.screen, EditSettingDialog)
        await pilot.press(*"max_num_se", "enter")  # Enter takes the completion
        assert app.screen.query_one("#edit-key", Input).value == "max_num_seqs"
        await pilot.press(*"abc")
        await pilot.pause(0.05)
        assert app.screen.query_one("#apply", Button).disabled
        assert "max_num_seqs" in plain(app.screen.query_one("#edit-preview").content)
        await pilot.press("backspace", "backspace", "backspace", "8")
        await pilot.pause(0.05)
        preview = plain(app.screen.query_one("#edit-preview").content)
        assert "4 → 8" in preview.replace("'", "") or "4 → '8'" in preview
        assert "fit: fits" in preview
        assert not app.screen.query_one("#apply", Button).disabled
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.sets.get("glm-5.3-flash"), 5, "setting stored")
        assert app.sets["glm-5.3-flash"] == {"max_num_seqs": "8"}
        assert "press l to launch" in results_text(app)


async def test_edit_one_setting_relaunches_and_compares_with_the_baseline() -> None:
    backend = ReplaySession()
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        await pilot.press("e", *"max_num_seqs", "enter", "8", "enter")
        await wait_until(pilot, lambda: app.last_compare is not None, 15, "comparison")
        assert [
            c.split()[0] for c in backend.nodes.calls if c.split()[0] in ("launch", "stop")
        ] == [
            "launch",
            "stop",
            "launch",
        ]
        assert backend.nodes.calls.count("bench") == 2 and "smoke" in backend.nodes.calls
        compare = plain(app.last_compare)
        assert "max_num_seqs" in compare and "vs baseline" in compare
        assert app.cluster is not None and app.cluster.overrides == {"max_num_seqs": "8"}
        await pilot.press("h")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HistoryScreen)
        assert len(app.screen.runs) >= 5  # two launches, a smoke run, two benchmarks


async def test_a_failing_smoke_check_names_its_cause_and_remedy() -> None:
    app = replay_app(ReplaySession(smoke_fails=True))
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        await pilot.press("t")
        await wait_until(pilot, lambda: app.last_smoke is not None, 5, "smoke")
        text = results_text(app)
        assert "smoke checks failed: tool_call" in text
        assert "✗ tool_call" in text and "plain text" in text and "tool_call_parser" in text


async def test_stop_while_loading_cancels_the_launch() -> None:
    backend = ReplaySession(
        freeze_when=lambda e: isinstance(e, RankStateChanged) and e.state is RankState.LOADING
    )
    app = replay_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        await pilot.press("l")
        await wait_until(pilot, lambda: app.busy == "launching" and app.cluster, 5, "launching")
        await pilot.press("l")  # a second launch is refused while one runs
        await pilot.pause(0.05)
        assert sum(c.startswith("launch") for c in backend.nodes.calls) == 1
        await pilot.press("s", "y")
        await wait_until(pilot, lambda: app.cluster is None and app.busy is None, 5, "stopped")
        assert len(backend.nodes.stopped) == 1
        await pilot.pause(0.05)
        assert all(w.is_finished for w in app.workers if w.group in ("follow", "launch"))

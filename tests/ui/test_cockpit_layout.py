"""The cockpit on a recorded demo launch (ReplaySession): log views, layouts (80x24, tabs
beyond two ranks), and the fit check while our own cluster runs."""

from __future__ import annotations

from cockpit_helpers import head_text, plain, settle, static_text, wait_until
from replay_app import discovered, launched_ready, replay_app
from textual.widgets import OptionList

from spark_tui.ops.events import RankState, RankStateChanged
from spark_tui.ui.widgets.logpane import LogPane, RankLog

SIZE = (160, 48)


async def test_log_filter_fullscreen_compact_and_escape() -> None:
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        log0 = app.panes[0].query_one(RankLog)
        app.panes[0].query_one(RankLog).focus()
        await pilot.press("slash", *"warning")
        await settle(pilot)
        assert log0.line_count > 0
        assert all("WARNING" in line for line in log0.lines)
        assert "/warning" in head_text(app, 0)
        await pilot.press("escape")
        await settle(pilot)
        assert app.panes[0].filter_text == "" and log0.line_count > 5
        # compact by default: no "(APIServer pid=...)" prefixes; `c` shows them
        assert not any(line.startswith("(APIServer pid=") for line in log0.lines)
        await pilot.press("c")
        await settle(pilot)
        assert any(line.startswith("(APIServer pid=") for line in log0.lines)
        await pilot.press("f")
        await pilot.pause(0.05)
        assert app.screen.maximized is app.panes[0]
        await pilot.press("escape")
        await pilot.pause(0.05)
        assert app.screen.maximized is None


async def test_small_terminal_keeps_every_panel_visible() -> None:
    app = replay_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await launched_ready(pilot)
        await pilot.press("t")
        await wait_until(pilot, lambda: app.last_smoke is not None, 5, "smoke")
        await pilot.press("b")
        await pilot.press("enter")  # the bench dialog: run with its settings
        await wait_until(pilot, lambda: app.last_bench is not None, 5, "bench")
        await settle(pilot)
        assert app.has_class("-short") and app.has_class("-narrow")
        for selector in ("#nodes", "#recipes", "#fit", "#results", LogPane):
            for widget in app.query(selector):
                assert widget.region.height >= 1 and widget.region.bottom <= 23, selector
        for pane in app.panes.values():
            assert pane.query_one(RankLog).region.height >= 5
        assert len(app.panes) == 2
        assert app.panes[0].region.right <= app.panes[1].region.x  # side by side


async def test_fit_counts_the_memory_our_own_running_cluster_holds_as_free() -> None:
    from dataclasses import replace

    from spark_tui.service.events import Probed

    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await launched_ready(pilot)
        # a refresh while our engines hold most of the memory
        busy = Probed([replace(n, memory_available_bytes=11 * 1024**3) for n in app.nodes])
        app.session.facts = busy.nodes  # what a refresh probe would have found
        app._show_probes(busy)
        await pilot.pause(0.05)
        assert "11 free" in static_text(app, "#nodes") or "(11 free)" in static_text(app, "#nodes")
        assert static_text(app, "#fit-body").lstrip().startswith("fits")
        assert app.query_one("#fit").border_subtitle == "our running cluster's memory counted free"
        # every recipe in the list, not only the selected one
        olist = app.query_one("#recipe-list", OptionList)
        rows = [plain(olist.get_option_at_index(i).prompt) for i in range(olist.option_count)]
        assert any(r.startswith("fits") and "glm-5.3-flash" in r for r in rows), rows
        # once stopped, the live facts count again
        await pilot.press("s", "y")
        await wait_until(pilot, lambda: app.cluster is None, 5, "stopped")
        # the cockpit probes again after a stop: once that is done, a refresh finds the
        # memory still taken (by something else now) and nothing of ours to credit it to
        await wait_until(
            pilot,
            lambda: not [w for w in app.workers if w.group == "stop" and not w.is_finished],
            10,
            "the probe after the stop",
        )
        app.session.facts = busy.nodes
        app._show_probes(busy)
        await pilot.pause(0.05)
        assert "does not fit" in static_text(app, "#fit-body")


async def test_more_than_two_ranks_get_tabs_with_their_state() -> None:
    from textual.widgets import TabbedContent

    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await discovered(pilot)
        app.build_panes([(0, "spark-a"), (1, "spark-b"), (2, "spark-c")])
        await pilot.pause(0.1)
        tabs = app.query_one(TabbedContent)
        assert tabs.tab_count == 3
        event = RankStateChanged(2, "spark-c", RankState.READY, progress=1.0)
        app._rank_state(event)
        await pilot.pause(0.05)
        assert str(tabs.get_tab("tab-2").label) == "rank 2 ✓"
        tabs.active = "tab-2"
        await pilot.pause(0.05)
        app.set_focus(None)
        await pilot.press("f")
        await pilot.pause(0.05)
        assert app.screen.maximized is app.panes[2]

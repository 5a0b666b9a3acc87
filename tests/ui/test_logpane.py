"""The log pane: batched writes, bounded buffers, follow-the-tail, filter, failure lines."""

from __future__ import annotations

from textual.app import App, ComposeResult

from spark_tui.ui.widgets.logpane import KEEP_LINES, PENDING_LIMIT, LogPane, RankLog


class PaneApp(App[None]):
    def compose(self) -> ComposeResult:
        yield LogPane(0, "spark-a")


async def test_lines_are_written_in_batches_not_one_by_one() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.query_one(RankLog)
        pane.push_many([f"line {i}" for i in range(50)])
        assert log.line_count == 0  # nothing reaches the widget before the timer fires
        await pilot.pause(0.25)
        assert log.line_count == 50
        assert log.lines[-1] == "line 49"


async def test_buffers_are_bounded_and_drops_counted() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        pane.push_many([f"l{i}" for i in range(PENDING_LIMIT + 10)])
        assert pane.dropped == 10
        await pilot.pause(0.25)
        pane.push_many([f"m{i}" for i in range(KEEP_LINES)])
        await pilot.pause(0.25)
        assert len(pane._all) == KEEP_LINES
        assert pane._all[-1] == f"m{KEEP_LINES - 1}"


async def test_follows_the_tail_until_the_user_scrolls_up() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 20)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.query_one(RankLog)
        pane.push_many([f"line {i}" for i in range(200)])
        await pilot.pause(0.3)
        assert log.is_vertical_scroll_end
        log.scroll_home(animate=False, immediate=True)
        await pilot.pause(0.05)
        top = log.scroll_y
        pane.push_many([f"more {i}" for i in range(50)])
        await pilot.pause(0.3)
        assert log.scroll_y == top  # stayed where the user put it
        log.scroll_end(animate=False, immediate=True)
        await pilot.pause(0.05)
        pane.push_many([f"tail {i}" for i in range(50)])
        await pilot.pause(0.3)
        assert log.is_vertical_scroll_end  # following again


async def test_filter_shows_only_matching_lines_and_clears() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.query_one(RankLog)
        pane.push_many(["INFO loading", "ERROR boom", "INFO ready", "WARNING careful"])
        await pilot.pause(0.25)
        pane.filter_text = "error|warn"
        await pilot.pause(0.05)
        assert list(log.lines) == ["ERROR boom", "WARNING careful"]
        pane.push("ERROR again")
        pane.push("INFO hidden")
        await pilot.pause(0.25)
        assert list(log.lines)[-1] == "ERROR again"
        pane.filter_text = ""
        await pilot.pause(0.05)
        assert log.line_count == 6


async def test_failure_lines_are_shown_above_the_log() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        pane.set_state("failed")
        pane.show_failure(
            "exited with code 1", ["ValueError: Free memory on device is less than desired"]
        )
        await pilot.pause(0.05)
        assert pane.has_class("failed")
        why = str(pane.query_one("#why-0").render())
        assert "Free memory on device" in why
        assert "exited with code 1" in why


def test_compact_lines_drop_vllm_prefixes_but_keep_levels() -> None:
    from spark_tui.ui.widgets.logpane import compact_line

    assert (
        compact_line("(APIServer pid=74) INFO 09-09 15:19:36 [api_server.py:1919] Starting vLLM")
        == "Starting vLLM"
    )
    assert (
        compact_line("(Worker pid=189) WARNING 09-09 15:20:47 [symm_mem.py:67] not supported")
        == "WARNING not supported"
    )
    assert compact_line("(APIServer pid=1) INFO:     127.0.0.1:1 - GET /health") == (
        "127.0.0.1:1 - GET /health"
    )
    assert compact_line("ValueError: boom") == "ValueError: boom"


def test_highlighter_marks_errors_whole_and_warnings_by_word() -> None:
    from rich.text import Text

    from spark_tui.ui.widgets.logpane import VllmLogHighlighter

    hl = VllmLogHighlighter()
    hl.set_colours("#ff0000", "#ffff00", "#00ff00", "#00ffff")
    error = hl(Text("ERROR ValueError: No available memory for the cache blocks"))
    assert error.spans and error.spans[0].start == 0 and error.spans[0].end == len(error)
    assert "ff0000" in str(error.spans[0].style.color.triplet.hex)
    warning = hl(Text("WARNING Custom collectives are disabled"))
    assert [(s.start, s.end) for s in warning.spans] == [(0, 7)]
    plain = hl(Text("Loading weights took 3.2 s"))
    assert plain.spans == []


async def test_keeps_following_the_tail_when_the_pane_shrinks() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.query_one(RankLog)
        pane.push_many([f"line {i}" for i in range(200)])
        await pilot.pause(0.3)
        assert log.is_vertical_scroll_end
        await pilot.resize_terminal(100, 12)
        await pilot.pause(0.2)
        pane.push_many([f"more {i}" for i in range(20)])
        await pilot.pause(0.3)
        assert log.is_vertical_scroll_end and log.follow

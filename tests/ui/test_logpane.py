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
        for i in range(50):
            pane.push(f"line {i}")
        assert log.line_count == 0  # nothing reaches the widget before the timer fires
        await pilot.pause(0.25)
        assert log.line_count == 50
        assert log.lines[-1] == "line 49"


async def test_buffers_are_bounded_and_drops_counted() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        for i in range(PENDING_LIMIT + 10):
            pane.push(f"l{i}")
        assert pane.dropped == 10
        await pilot.pause(0.25)
        for i in range(KEEP_LINES):
            pane.push(f"m{i}")
        await pilot.pause(0.25)
        assert len(pane._all) == KEEP_LINES
        assert pane.lines[-1] == f"m{KEEP_LINES - 1}"


async def test_follows_the_tail_until_the_user_scrolls_up() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 20)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.query_one(RankLog)
        for i in range(200):
            pane.push(f"line {i}")
        await pilot.pause(0.3)
        assert log.is_vertical_scroll_end
        log.scroll_home(animate=False, immediate=True)
        await pilot.pause(0.05)
        top = log.scroll_y
        for i in range(50):
            pane.push(f"more {i}")
        await pilot.pause(0.3)
        assert log.scroll_y == top  # stayed where the user put it
        log.scroll_end(animate=False, immediate=True)
        await pilot.pause(0.05)
        for i in range(50):
            pane.push(f"tail {i}")
        await pilot.pause(0.3)
        assert log.is_vertical_scroll_end  # following again


async def test_filter_shows_only_matching_lines_and_clears() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.query_one(RankLog)
        for line in ["INFO loading", "ERROR boom", "INFO ready", "WARNING careful"]:
            pane.push(line)
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
        # not a regular expression: said in the header, matched as plain text
        pane.filter_text = "boom["
        await pilot.pause(0.05)
        assert pane.filter_error and "not a regex" in pane._head_text().plain
        assert list(log.lines) == []
        pane.push("ERROR boom[1]")
        await pilot.pause(0.25)
        assert list(log.lines) == ["ERROR boom[1]"]


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


def test_lines_are_coloured_by_their_classified_kind_not_by_their_words() -> None:
    from rich.text import Text

    from spark_tui.ui.widgets.logpane import KindHighlighter

    hl = KindHighlighter()
    hl.set_colours("#ff0000", "#ffff00", "#00ff00", "#00ffff")
    hl.kind = "error"
    error = hl(Text("ValueError: No available memory for the cache blocks"))
    assert error.spans and error.spans[0].start == 0 and error.spans[0].end == len(error)
    assert "ff0000" in str(error.spans[0].style.color.triplet.hex)
    # A line that mentions ERROR but was classified as info (core.logclass decides) stays plain.
    hl.kind = "info"
    assert hl(Text("INFO counting ERROR lines so far: 0")).spans == []
    hl.kind = "warning"
    assert hl(Text("WARNING Custom collectives are disabled")).spans


async def test_our_own_requests_are_folded_into_a_count() -> None:
    from spark_tui.service.events import LogLine
    from spark_tui.service.logs import is_own_request

    line = '(APIServer pid=74) INFO:     127.0.0.1:51002 - "GET /metrics HTTP/1.1" 200 OK'
    user = '(APIServer pid=74) INFO:     10.0.0.9:4 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    from spark_tui.core.logclass import classify

    def event(text: str) -> LogLine:
        c = classify(text)
        return LogLine(0, "spark-a", text, c.kind, None, c.detail, c.scope)

    assert is_own_request(event(line)) and not is_own_request(event(user))
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        for _ in range(40):
            pane.push(line, "debug", own=True)
        pane.push(user, "debug")
        await pilot.pause(0.25)
        assert pane.lines == [user]
        assert "40 own requests hidden" in pane._head_text().plain


async def test_keeps_following_the_tail_when_the_pane_shrinks() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.query_one(RankLog)
        for i in range(200):
            pane.push(f"line {i}")
        await pilot.pause(0.3)
        assert log.is_vertical_scroll_end
        await pilot.resize_terminal(100, 12)
        await pilot.pause(0.2)
        for i in range(20):
            pane.push(f"more {i}")
        await pilot.pause(0.3)
        assert log.is_vertical_scroll_end and log.follow


async def test_a_write_measures_its_lines_at_once_without_a_thread_worker() -> None:
    # Textual's Log measured each write in a thread worker that held the write's lines until
    # the event loop took its result: in a burst tens of batches stayed alive together.
    app = PaneApp()
    async with app.run_test(size=(100, 30)):
        pane = app.query_one(LogPane)
        log = pane.query_one(RankLog)
        lines = ["short", "x" * 300, "漢字" * 200, "a\tb", "ready"]
        for line in lines:
            pane.push(line)
        pane.flush()
        assert list(app.workers) == []
        assert log.lines == lines
        assert log.virtual_size.width == 800  # the CJK line: two cells a character
        pane.push("y" * 900)
        pane.flush()
        assert list(app.workers) == []
        assert log.virtual_size.width == 900

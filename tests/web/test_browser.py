"""The web demo in a real headless Chromium: the page loads, the cockpit draws, `l` brings
both ranks to ready, `t` passes the smoke checks; a second tab over the cap gets the "full"
page; closing the tab ends that visitor's cockpit and its simulated Sparks."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.procs import descendants, running


def test_the_demo_in_chromium(
    browser_demo: ModuleType, chromium_path: str, server_home: Path, tmp_path: Path
) -> None:
    server = browser_demo.start_server("--max-visitors", "1", home=server_home)
    pid = server.proc.pid
    try:
        with browser_demo.browser() as chromium:
            tab = browser_demo.Cockpit(chromium, server.url)
            assert tab.response.status == 200
            shot = tmp_path / "browser.png"
            story = browser_demo.launch_and_smoke(tab, shot)

            assert "DEMO" in story.first and "sim-spark-1" in story.first
            heads = [
                line for line in story.ready.splitlines() if "rank 0" in line or "rank 1" in line
            ]
            assert any("rank 0" in h and "ready" in h for h in heads), story.ready
            assert any("rank 1" in h and "ready" in h for h in heads), story.ready
            assert "smoke checks passed (5/5)" in story.smoke
            for check in ("health", "models", "chat", "tool_call", "streaming"):
                assert check in story.smoke, check
            assert "✗" not in story.smoke
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000

            # one visitor at most: a second tab gets the page that says so, nothing started
            visitor_procs = descendants(pid)
            assert len(visitor_procs) >= 3, "the visitor's cockpit and an engine per rank"
            second = chromium.new_page()
            reply = second.goto(server.url)
            assert reply is not None and reply.status == 503
            assert "The demo is full" in second.inner_text("#full")
            assert descendants(pid) == visitor_procs
            second.close()

            # the tab closes: its cockpit, simulated Sparks and engines end; the server stays
            tab.page.close()
            browser_demo.wait_until(
                lambda: not any(running(p) for p in visitor_procs),
                40,
                "the closed tab's processes to end",
            )
            assert server.proc.poll() is None
            # and its seat is free again
            again = browser_demo.Cockpit(chromium, server.url)
            again.wait_for(lambda s: "2 of 2 nodes reachable" in s, 60, "a new visitor's cockpit")
            last = descendants(pid)
            assert last, "the new visitor's cockpit runs"
    finally:
        code = browser_demo.stop(server)
    assert code == 0
    # Ctrl+C with a visitor on: nothing of it is left
    browser_demo.wait_until(lambda: not any(running(p) for p in last), 10, "every process to end")

"""`spark-tui demo --web` in a real headless Chromium: the page loads, the cockpit draws, `l`
launches the demo cluster until both ranks are ready, `t` passes the smoke checks; then the
README's browser screenshot is taken. The browser is the system's Chromium (Debian's
`chromium` package), driven by Playwright, which never downloads one of its own.

Usage: python screenshots/browser_demo.py   (writes screenshots/11-browser.png)
tests/web drives the same functions and asserts on what they return.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCREENSHOT = HERE / "11-browser.png"
VIEWPORT = {"width": 1280, "height": 800}
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")

# textual-serve keeps its xterm.js terminal in a closure; this hook catches the object that
# holds it as it is built (its first own `webglAddon`), so the screen's text can be read.
CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, "webglAddon", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "webglAddon", {value, writable: true, configurable: true});
    window.__textual = this;
  },
});
"""
READ_SCREEN = """
() => {
  const t = window.__textual && window.__textual.terminal;
  if (!t) return "";
  const b = t.buffer.active, rows = [];
  for (let y = 0; y < t.rows; y++) {
    const line = b.getLine(b.viewportY + y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows.join("\\n");
}
"""


def chromium() -> str | None:
    """The system's Chromium, if installed."""
    for name in CHROMIUM_NAMES:
        if path := shutil.which(name):
            return path
    return None


@dataclass
class Server:
    """A `spark-tui demo --web` subprocess and the link it printed."""

    proc: subprocess.Popen[str]
    url: str
    output: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return self.url.split("/", 3)[0] + "//" + self.url.split("/", 3)[2]


def start_server(*args: str, home: Path, timeout: float = 30.0) -> Server:
    """Start the web demo at test speed on a free port; return once it printed its link."""
    env = dict(os.environ)
    env.update(
        SPARK_SIM_PACE="0.05",
        SPARK_SIM_TOKEN_SCALE="0.05",
        PYTHONPATH=str(ROOT),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        SPARK_TUI_DATA_DIR=str(home / "data"),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_tui", "demo", "--web", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    output: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        if match := re.search(r"open (http://\S+)", line):
            # Keep reading what it prints, so that a full pipe never stalls the server.
            threading.Thread(target=output.extend, args=(proc.stdout,), daemon=True).start()
            return Server(proc, match.group(1), output)
    proc.kill()
    raise RuntimeError("spark-tui demo --web printed no link:\n" + "".join(output))


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)
    return value


@contextmanager
def browser() -> Iterator[Any]:
    """A headless system Chromium under Playwright."""
    from playwright.sync_api import sync_playwright

    path = chromium()
    if path is None:
        raise RuntimeError("no Chromium here: apt-get install chromium")
    with sync_playwright() as p:
        # --no-sandbox: CI and containers run as root, where Chromium's sandbox cannot start.
        instance = p.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        try:
            yield instance
        finally:
            instance.close()


class Cockpit:
    """One browser tab on the web demo, read as the text of its terminal."""

    def __init__(self, instance: Any, url: str) -> None:
        self.page = instance.new_page(viewport=VIEWPORT)
        self.page.add_init_script(CATCH_TERMINAL)
        self.response = self.page.goto(url + "?fontsize=14")

    def screen(self) -> str:
        return str(self.page.evaluate(READ_SCREEN))

    def wait_for(self, condition: Callable[[str], bool], timeout: float, what: str) -> str:
        """The screen once `condition` holds for it (else an error that shows it)."""
        last = [""]

        def holds() -> bool:
            last[0] = self.screen()
            return condition(last[0])

        try:
            wait_until(holds, timeout, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the screen:\n{last[0]}") from None
        return last[0]

    def press(self, key: str) -> None:
        self.page.locator(".xterm-helper-textarea").focus()
        self.page.keyboard.press(key)


@dataclass
class Story:
    """What the browser saw on the way from first frame to smoke checks."""

    first: str
    ready: str
    smoke: str


def launch_and_smoke(tab: Cockpit, screenshot: Path | None = None) -> Story:
    """The demo story in one tab: discovery, `l` to both ranks ready, `t` to smoke passed."""
    first = tab.wait_for(lambda s: "2 of 2 nodes reachable" in s, 60, "the cockpit's discovery")
    tab.press("l")
    ready = tab.wait_for(lambda s: "ready (t smoke" in s, 90, "both ranks ready")
    tab.press("t")
    smoke = tab.wait_for(lambda s: "smoke checks passed" in s, 60, "the smoke checks")
    if screenshot is not None:
        time.sleep(0.5)  # the last frame's paint
        tab.page.screenshot(path=str(screenshot))
    return Story(first, ready, smoke)


def stop(server: Server, timeout: float = 40.0) -> int:
    """Ctrl+C the server and wait for it; its exit status."""
    server.proc.send_signal(signal.SIGINT)
    return server.proc.wait(timeout)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="spark-tui-browser-") as home:
        server = start_server(home=Path(home))
        try:
            with browser() as instance:
                story = launch_and_smoke(Cockpit(instance, server.url), SCREENSHOT)
        finally:
            stop(server)
    print(story.smoke)
    print(f"wrote {SCREENSHOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

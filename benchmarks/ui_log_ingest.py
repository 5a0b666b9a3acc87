"""Log ingest into two panes while a key press must still be answered within 100 ms.

Runs the real cockpit log panes headless (Textual's test driver), feeds both panes as fast
as a producer can while the app keeps running, presses a key every 0.2 s and measures how
long the app takes to handle it. Then pushes 1,000,000 lines and reports memory above the
idle app. Prints figures; asserts nothing.
Usage: python benchmarks/ui_log_ingest.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import time

from textual.app import App, ComposeResult
from textual.containers import Horizontal

from spark_tui.ui.widgets.logpane import LogPane

LINE = (
    "(Worker_TP0 pid=189) INFO 09-09 15:30:58 [model_runner.py:408] "
    "Loading safetensors checkpoint shards:  45% Completed | 27/60 [00:41<00:50, 1.6s/it] #{}"
)


class IngestApp(App[None]):
    """Two log panes side by side, as the cockpit shows two ranks."""

    def __init__(self) -> None:
        super().__init__()
        self.key_times: list[float] = []
        self._pressed_at = 0.0

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield LogPane(0, "spark-a")
            yield LogPane(1, "spark-b")

    def key_x(self) -> None:
        self.key_times.append(time.perf_counter() - self._pressed_at)


async def ingest_at(app: IngestApp, pilot, panes, rate: int, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """Offer `rate` lines/s in total (half per pane) for `seconds`; press a key every 0.2 s."""
    app.key_times.clear()
    before = sum(p.received for p in panes)
    dropped = sum(p.dropped for p in panes)
    start = time.perf_counter()
    sent = 0
    next_key = start + 0.2
    while (now := time.perf_counter()) - start < seconds:
        due = int((now - start) * rate) - sent
        if due > 0:
            for pane in panes:
                for i in range(due // 2):
                    pane.push(LINE.format(sent + i))
            sent += due - due % 2
        if now >= next_key:
            app._pressed_at = time.perf_counter()
            await pilot.press("x")
            next_key = time.perf_counter() + 0.2
        await asyncio.sleep(0.005)
    await pilot.pause(0.3)
    got = sum(p.received for p in panes) - before
    lost = sum(p.dropped for p in panes) - dropped
    lat = sorted(app.key_times)
    p95 = lat[max(0, int(len(lat) * 0.95) - 1)]
    print(
        f"offered {rate:>7,} lines/s: absorbed {(got - lost) / seconds:>9,.0f} lines/s, "
        f"dropped {lost:,}; key latency median {statistics.median(lat) * 1000:.1f} ms, "
        f"p95 {p95 * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms ({len(lat)} presses)"
    )


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load() -> str:
    """The load average (1 and 5 minutes): the figures depend on what else the cores run."""
    one, five, _fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f}"


async def run(seconds: float) -> None:
    print(f"start: {load()}")
    app = IngestApp()
    async with app.run_test(size=(160, 48)) as pilot:
        panes = list(app.query(LogPane))
        await pilot.pause(0.3)
        gc.collect()
        idle = rss_mb()
        for rate in (50_000, 100_000, 200_000):
            await ingest_at(app, pilot, panes, rate, seconds)
        # memory after one and two million lines: bounded buffers keep it flat
        for million in (1, 2):
            start = sum(p.received for p in panes)
            while sum(p.received for p in panes) < start + 1_000_000:
                for pane in panes:
                    for i in range(1000):
                        pane.push(LINE.format(i))
                await pilot.pause(0)
            await pilot.pause(0.5)
            gc.collect()
            after = rss_mb()
            print(
                f"memory after {million},000,000 more lines: {after:.1f} MB "
                f"(+{after - idle:.1f} MB above idle {idle:.1f} MB; budget +60 MB)"
            )
        print(
            f"dropped from pending buffers (overload protection): {sum(p.dropped for p in panes):,}"
        )
    print(f"end: {load()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    asyncio.run(run(args.seconds))


if __name__ == "__main__":
    main()

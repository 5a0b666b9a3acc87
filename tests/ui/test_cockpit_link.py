"""The link panel: the benchmark's samples, its peaks once done, and the watch's samples
after it beside those peaks; narrow, one row."""

from __future__ import annotations

from cockpit_helpers import plain, wait_until
from snapshot_states import benched, make_app

from spark_tui.core.link import InterfaceRate
from spark_tui.service import events as ev
from spark_tui.ui import messages as msg
from spark_tui.ui.widgets.link import LinkPanel

GIB = 1024**3


async def test_bench_peaks_then_live_samples_beside_them() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await benched(pilot)
        panel = app.query_one(LinkPanel)
        assert panel.display
        text = plain(panel.render_body())
        assert "link (last benchmark)" in text
        assert "sim-spark-1 enp1s0f1np1 peak ↓1.84 ↑1.84 GB/s 7.4% · least free 21/120 GiB" in text
        # The watch keeps sampling after the benchmark: its rates show above the peaks.
        rate = InterfaceRate("enp1s0f1np1", 2.5e8, 5e7, 25e9, 1, 1)
        panel.post_message(
            msg.LinkSampled(ev.LinkSample("sim-spark-1", 128 * GIB, 90 * GIB, (rate,)))
        )
        await wait_until(pilot, lambda: "↓0.25 " in plain(panel.render_body()), 5, "live sample")
        lines = plain(panel.render_body()).splitlines()
        assert lines[:3] == [
            "link",
            "  sim-spark-1 enp1s0f1np1 ↓0.25 ↑0.050 GB/s 1.0% of 25 GB/s · 90/128 GiB free",
            "last benchmark",
        ]
        assert "peak ↓1.84" in lines[3]


async def test_narrow_panel_is_one_row() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await benched(pilot)
        text = plain(app.query_one(LinkPanel).render_body()).strip()
        assert text == "link sim-spark-1 ↓1.84 ↑1.84 7.4% · sim-spark-2 ↓1.84 ↑1.84 7.4%"


async def test_narrow_row_with_eight_nodes_shows_the_busiest_whole_and_counts_the_rest() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await benched(pilot)
        panel = app.query_one(LinkPanel)
        panel.bench = None
        for k in range(1, 9):
            # sim-spark-5 is the busiest: it comes first, whole.
            rx = 5e9 if k == 5 else 1e8 * k
            rate = InterfaceRate("enp1s0f1np1", rx, 1e8, 25e9, 1, 1)
            panel.post_message(
                msg.LinkSampled(ev.LinkSample(f"sim-spark-{k}", 128 * GIB, 90 * GIB, (rate,)))
            )
        await wait_until(pilot, lambda: len(panel.samples) == 8, 5, "eight samples")
        text = plain(panel.render_body()).strip()
        assert text.startswith("link sim-spark-5 ↓5.00 ↑0.10 20%"), text
        shown = text.count("sim-spark-")
        assert 1 < shown < 8 and text.endswith(f" +{8 - shown} more"), text
        assert len(text) <= 78, text

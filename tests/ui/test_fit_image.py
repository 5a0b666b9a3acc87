"""The fit panel names the nightly a sentinel image was resolved to, with its digest."""

from __future__ import annotations

from rich.console import Console

from spark_tui.ui.widgets.fitpanel import render_fit


def _text(wide: bool) -> str:
    report = {
        "verdict": "fits",
        "findings": [],
        "nodes": [],
        "image_resolved": {
            "requested": "eugr/spark-vllm:latest",
            "image": "ghcr.io/spark-arena/dgx-vllm-eugr-nightly:2026-12-02",
            "tag": "2026-12-02",
            "digest": "sha256:" + "ab12" * 16,
        },
    }
    console = Console(width=100 if wide else 40, record=True, color_system=None)
    console.print(render_fit(report, None, wide))
    return console.export_text()


def test_the_fit_panel_names_the_nightly_and_its_digest() -> None:
    assert (
        "image ghcr.io/spark-arena/dgx-vllm-eugr-nightly:2026-12-02 ab12ab12ab12 (newest nightly)"
        in _text(wide=True)
    )
    assert "nightly 2026-12-02 ab12ab12ab12" in _text(wide=False)

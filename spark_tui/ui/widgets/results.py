"""The results bar: smoke checks, benchmark sweep (with a small chart), comparisons."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

BARS = " ▁▂▃▄▅▆▇█"


def smoke_line(results: list[dict[str, Any]]) -> Text:
    """`health ok 4 ms | chat ok 1.2 s | ...`, failures in red with their cause."""
    text = Text()
    for i, res in enumerate(results):
        if i:
            text.append(" | ", style="dim")
        ok = res.get("ok")
        text.append(f"{res['name']} ")
        text.append("ok" if ok else "FAIL", style="green" if ok else "bold red")
        latency = res.get("latency_s")
        if latency is not None:
            text.append(
                f" {latency * 1000:.0f} ms" if latency < 1 else f" {latency:.1f} s", style="dim"
            )
        if ok and res.get("detail"):
            text.append(f" {res['detail']}", style="dim")
    failed = [r for r in results if not r.get("ok")]
    if failed:
        first = failed[0]
        text.append(
            f"\n{first['name']}: {first.get('cause') or first.get('detail') or ''}", style="red"
        )
        if first.get("remedy"):
            text.append(f"  → {first['remedy']}", style="dim")
    return text


def sweep_chart(levels: list[dict[str, Any]]) -> Text:
    """One bar per concurrency level of total output tokens/s, with the figures."""
    text = Text()

    def figure(lv: dict[str, Any], name: str) -> float | None:
        value = (lv.get("figures") or {}).get(name)
        return None if value is None else float(value)

    peak = max((figure(lv, "total_output_tps") or 0.0 for lv in levels), default=0.0) or 1.0
    for lv in levels:
        tps = figure(lv, "total_output_tps") or 0.0
        bar = BARS[min(8, int(tps / peak * 8))]
        text.append(f"c{lv['concurrency']} ", style="dim")
        text.append(bar * 3, style="green")
        ttft = figure(lv, "ttft_p50_s")
        ttft_s = f" ttft {ttft * 1000:.0f}ms" if ttft is not None else ""
        text.append(f" {tps:.0f} tok/s{ttft_s}  ", style="")
    return text


class ResultsBar(Static):
    """Two to four lines under the logs."""

    DEFAULT_CSS = """
    ResultsBar { height: auto; min-height: 1; max-height: 6; border-top: solid $panel-lighten-2; padding: 0 1; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.status = Text("no cluster running: pick a recipe and press l", style="dim")
        self.smoke: Text | None = None
        self.bench: Text | None = None
        self.compare: Text | None = None

    def _redraw(self) -> None:
        parts = [p for p in (self.status, self.smoke, self.bench, self.compare) if p is not None]
        self.update(Text("\n").join(parts))

    def set_status(self, text: Text | str) -> None:
        self.status = text if isinstance(text, Text) else Text(text)
        self._redraw()

    def set_smoke(self, results: list[dict[str, Any]] | None) -> None:
        self.smoke = smoke_line(results) if results else None
        self._redraw()

    def set_bench(self, levels: list[dict[str, Any]] | None, note: str = "") -> None:
        self.bench = sweep_chart(levels) + Text(note, style="dim") if levels else None
        self._redraw()

    def set_compare(self, text: Text | None) -> None:
        self.compare = text
        self._redraw()

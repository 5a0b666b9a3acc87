"""The results bar's lines (spark_tui.ui.widgets.results): the API's endpoint, the smoke
checks, the benchmark's levels as a small chart. Loaded with the first result: the first
frame shows none."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from spark_tui.core.wording import depth_label

BLOCKS = " ▏▎▍▌▋▊▉█"
SHORT_NAMES = {"tool_call": "tools", "streaming": "stream"}


def duration(seconds: float | None) -> str:
    """`4 ms`, `1.2 s`; empty when unknown."""
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def smoke_line(results: list[dict[str, Any]], wide: bool = True) -> Text:
    """`smoke ✓ health 4 ms ✓ chat 1.2 s ...`; a failure in red with its cause and remedy."""
    ok_all = all(r.get("ok") for r in results)
    text = Text(no_wrap=not wide, overflow="ellipsis")
    text.append("smoke ", style="bold green" if ok_all else "bold red")
    for res in results:
        ok = bool(res.get("ok"))
        name = res["name"] if wide else SHORT_NAMES.get(res["name"], res["name"])
        text.append(
            ("✓ " if ok else "✗ ") if wide else ("✓" if ok else "✗"),
            style="green" if ok else "bold red",
        )
        text.append(name, style="" if ok else "bold red")
        latency = duration(res.get("latency_s"))
        if latency:
            text.append(" " + (latency if wide else latency.replace(" ", "")), style="dim")
        if wide and ok and res["name"] == "tool_call":
            data = res.get("data") or {}
            if data.get("function"):
                args = str(data.get("arguments") or "")
                args = args if len(args) <= 30 else args[:29] + "…"
                text.append(f" {data['function']}({args})", style="dim")
        text.append("  " if wide else " ")
    text.rstrip()
    failed = [r for r in results if not r.get("ok")]
    if failed:
        first = failed[0]
        cause = first.get("cause") or first.get("detail") or "failed"
        text.append(f"\n{first['name']}: {cause}", style="red")
        if first.get("remedy"):
            text.append(f"  → {first['remedy']}", style="dim")
    return text


def endpoint_line(endpoint: Any, copy_key: str = "y") -> Text:
    """`API http://10.0.0.1:8000/v1  y copies the tunnel command`: the endpoint in one line,
    for a small terminal where the results need the room."""
    api = Text(no_wrap=True, overflow="ellipsis")
    api.append("API ", style="bold")
    api.append(endpoint.api_url)
    api.append(f"  {copy_key} copies the tunnel command", style="dim")
    return api


def endpoint_lines(endpoint: Any, copy_key: str = "y") -> list[Text]:
    """`API http://10.0.0.1:8000/v1` and `tunnel ssh -N -L ...`, one line each and never
    wrapped (a mouse copy of a wrapped command breaks it): a line too long for the terminal
    ends in an ellipsis, and `copy_key` copies the whole command."""
    api = Text(no_wrap=True, overflow="ellipsis")
    api.append("API ", style="bold")
    api.append(endpoint.api_url)
    api.append(f"  from your machine: tunnel below, {copy_key} copies it", style="dim")
    tunnel = Text(no_wrap=True, overflow="ellipsis")
    tunnel.append("tunnel ", style="bold")
    tunnel.append(endpoint.tunnel)
    return [api, tunnel]


def _figure(level: dict[str, Any], name: str) -> float | None:
    value = (level.get("figures") or {}).get(name)
    return None if value is None else float(value)


def level_label(level: dict[str, Any]) -> str:
    """`c8`, or `c8@4k` at a context depth."""
    depth = int(level.get("context_depth") or 0)
    return f"c{level['concurrency']}" + (f"@{depth_label(depth)}" if depth else "")


def sweep_chart(levels: list[dict[str, Any]], wide: bool = True, width: int = 24) -> Text:
    """Total output tokens/s per level, one bar each, with its TTFT and ITL (narrow: a
    shorter bar, so a level's figures fit in 80 columns)."""
    peak = max((_figure(lv, "total_output_tps") or 0.0 for lv in levels), default=0.0) or 1.0
    text = Text(no_wrap=not wide, overflow="ellipsis")
    width = width if wide else 8
    label_width = max(4, *(len(level_label(lv)) + 1 for lv in levels))
    for i, lv in enumerate(levels):
        if i:
            text.append("\n")
        tps = _figure(lv, "total_output_tps") or 0.0
        text.append("bench " if i == 0 else "      ", style="bold")
        text.append(f"{level_label(lv):<{label_width}}", style="dim")
        eighths = int(round(tps / peak * width * 8))
        full, part = divmod(eighths, 8)
        bar = "█" * full + (BLOCKS[part] if part else "")
        text.append(f"{bar:<{width}}", style="green")
        text.append(f" {tps:6.0f} tok/s")
        ttft, itl = _figure(lv, "ttft_p50_s"), _figure(lv, "itl_mean_s")
        if ttft is not None:
            text.append(f"  TTFT p50 {duration(ttft)}")
        if itl is not None:
            text.append(f"  ITL {itl * 1000:.1f} ms")
        goodput = _figure(lv, "goodput_rps")
        if goodput is not None:
            text.append(f"  goodput {goodput:.2f}/s", style="dim")
        errors = lv.get("errors") or 0
        if errors:
            text.append(f"  {errors} errors", style="bold red")
    return text

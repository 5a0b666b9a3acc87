"""The link panel's rows (spark_tui.ui.widgets.link): a node's interfaces as sampled, a
benchmark's peaks, one row of them at 80 columns. Loaded with the first sample: the first
frame has none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from spark_tui.core.link import LinkFigure, MemoryFigure
    from spark_tui.service import events as ev

GIB = 1024**3


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.0f}"


def sample_text(sample: ev.LinkSample, wide: bool) -> Text:
    """`spark-a enp1s0f1np1 ↓1.73 ↑1.70 GB/s 7% of 25 GB/s · 98/128 GiB free`."""
    # Loaded on the first sample, not with the cockpit's first frame.
    from spark_tui.core.link import GB, fmt_gbs, fmt_share

    text = Text()
    text.append(sample.node)
    for r in sample.interfaces:
        if wide:
            text.append(f" {r.interface}", style="dim")
        text.append(f" ↓{fmt_gbs(r.rx_bytes_per_s)} ↑{fmt_gbs(r.tx_bytes_per_s)}", style="bold")
        text.append(" GB/s " if wide else " ", style="dim")
        text.append(fmt_share(r.share), style="bold")
        if wide and r.speed_bytes_per_s:
            text.append(f" of {r.speed_bytes_per_s / GB:g} GB/s", style="dim")
    for name in sample.missing:
        text.append(f" {name} not on the node", style="yellow")
    if not sample.interfaces and not sample.missing:
        text.append(" no rank interface", style="dim")
    if wide:
        text.append(" · ", style="dim")
        text.append(f"{_gib(sample.mem_available)}/{_gib(sample.mem_total)} GiB free")
    return text


def figure_text(fig: LinkFigure, memory: MemoryFigure | None, wide: bool) -> Text:
    """`spark-a enp1s0f1np1 peak ↓1.73 ↑1.70 GB/s 7% · least free 98/128 GiB`."""
    # Loaded on the first sample, not with the cockpit's first frame.
    from spark_tui.core.link import GB, fmt_gbs, fmt_share

    text = Text()
    text.append(fig.node)
    if wide:
        text.append(f" {fig.interface}", style="dim")
    text.append(" peak " if wide else " ", style="dim")
    rx = None if fig.rx_peak_gbs is None else fig.rx_peak_gbs * GB
    tx = None if fig.tx_peak_gbs is None else fig.tx_peak_gbs * GB
    text.append(f"↓{fmt_gbs(rx)} ↑{fmt_gbs(tx)}", style="bold")
    text.append(" GB/s " if wide else " ", style="dim")
    text.append(fmt_share(fig.peak_share), style="bold")
    if wide and memory is not None:
        text.append(" · least free ", style="dim")
        text.append(f"{_gib(memory.min_available)}/{_gib(memory.total)} GiB")
    return text


def busiest_first(sample: ev.LinkSample) -> float:
    """The sort key that puts the node with the busiest interface first."""
    shares = [r.share for r in sample.interfaces if r.share is not None]
    return -max(shares, default=0.0)


def one_row(parts: list[Text], width: int) -> Text:
    """`link a ↓… · b ↓… +2 more`: as many nodes as the row holds, the busiest first
    (the caller's order), and how many did not fit, so 4 or 8 nodes stay readable at 80
    columns instead of being cut mid-node."""
    row = Text("link ", style="bold")
    for i, part in enumerate(parts):
        left = len(parts) - i - 1
        more = f" +{left} more" if left else ""
        sep = Text(" · ", style="dim") if i else Text()
        if row.cell_len + sep.cell_len + part.cell_len + len(more) > width and i:
            row.append(f" +{len(parts) - i} more", style="dim")
            return row
        row += sep + part
    return row

"""The node panel's lines: each node's state, GPU, memory, ConnectX links, images and models
(loaded with the first probe's answer: the first frame has no node to draw)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts

GIB = 1024**3


@dataclass
class NodeView:
    """What the panel shows for one node: its facts (when probed) and its state."""

    name: str
    state: str = "probing"  # probing | reachable | error
    facts: NodeFacts | None = None
    error: str | None = None
    remedy: str | None = None
    cluster_ranks: list[int] = field(default_factory=list)
    outage: str | None = None  # "unreachable since 12 s, retrying" while its link is down


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.0f}"


# With more nodes than this, each node takes fewer lines (the panel's rows show four nodes
# at once instead of the first two).
FULL_NODES = 2


def _one_line(view: NodeView, order: int | None, picking: bool) -> Text:
    """`● sim-spark-1 21/120G` (free/total): a node in one line (narrow, many nodes); a
    node with no ConnectX link up says so after it. While nodes are picked, a picked
    node's mark is its place (1: the head) and the others are dimmed."""
    facts = view.facts
    if view.outage or view.state != "reachable" or facts is None:
        error = view.state == "error"
        out = Text("✖ " if error else "◌ ", style="red" if error else "yellow")
        out.append(view.name, style="bold")
        what = view.outage or (view.error or "unreachable" if error else "probing…")
        out.append(f" {what}", style="red" if error else "dim")
        return out
    if order is not None:
        out = Text(f"{order + 1} ", style="bold green")
    elif picking:
        out = Text("· ", style="dim")
    else:
        out = Text("● ", style="green")
    out.append(view.name, style="dim" if picking and order is None else "bold")
    out.append(f" {_gib(facts.memory_available_bytes)}/{_gib(facts.memory_total_bytes)}G")
    if not facts.connectx_up:
        out.append(" no link up", style="red")
    return out


def _role(index: int, order: int | None, picking: bool) -> str:
    """What the node is to the next launch: the head, its place in the pick, left out."""
    if not picking:
        return " head" if index == 0 else ""
    if order is None:
        return " left out"
    return " head" if order == 0 else f" pick {order + 1}"


def wiring_line(views: list[NodeView]) -> str | None:
    """How the probed nodes are cabled, in one short line (None: fewer than two probed)."""
    probed = [v.facts for v in views if v.facts is not None]
    if len(probed) < 2:
        return None
    # Loaded once nodes are probed, not with the cockpit's first frame (which draws the
    # panel before any probe).
    from spark_tui.core.wiring import wiring_of

    return wiring_of(probed).short


def render_nodes(
    views: list[NodeView],
    wide: bool = True,
    picked: Sequence[str] = (),
    cursor: int | None = None,
    starts: list[int] | None = None,
) -> Text:
    """The panel's text: the cabling in one line, then up to four lines per node; with
    more than two nodes, two lines each (its first link only), or one when narrow (and
    no cabling line, so four nodes still fit). `picked`: the nodes the next launch runs
    on, head first (empty: every node, the first the head); `cursor`: the highlighted
    node; `starts` gets each node's first line."""
    many = len(views) > FULL_NODES
    picking = bool(picked)
    order = {name: i for i, name in enumerate(picked)}
    out = Text()

    def name_style(i: int) -> str:
        dim = picking and views[i].name not in order
        return ("dim " if dim else "bold ") + ("reverse" if i == cursor else "")

    if not wide and many:
        for i, view in enumerate(views):
            if i:
                out.append("\n")
            if starts is not None:
                starts.append(i)
            line = _one_line(view, order.get(view.name), picking)
            if i == cursor:
                line.stylize("reverse", 2, 2 + len(view.name))
            out.append_text(line)
        return out
    wiring = wiring_line(views)
    if wiring:
        out.append(f"⇄ {wiring}\n", style="dim")
    for i, view in enumerate(views):
        if i:
            out.append("\n")
        if starts is not None:
            starts.append(out.plain.count("\n"))
        mark, style = (
            ("◌", "yellow")
            if view.outage
            else {
                "reachable": ("●", "green"),
                "probing": ("◌", "yellow"),
                "error": ("✖", "red"),
            }.get(view.state, ("?", ""))
        )
        out.append(f"{mark} ", style=style)
        out.append(view.name, style=name_style(i))
        out.append(_role(i, order.get(view.name), picking), style="dim")
        facts = view.facts
        if view.outage:
            out.append(f"\n  {view.outage}", style="yellow")
            if view.remedy and wide:
                out.append(f"\n  → {view.remedy}", style="dim")
            continue
        if view.state == "error":
            out.append(f"\n  {view.error or 'unreachable'}", style="red")
            if view.remedy and wide:
                out.append(f"\n  → {view.remedy}", style="dim")
            continue
        if facts is None:
            out.append("  probing…", style="dim")
            continue
        gpu = (facts.gpu_name or "GPU ?").replace("NVIDIA ", "")
        if wide:
            out.append(f"  {gpu} {_gib(facts.memory_total_bytes)} GiB")
            out.append(f" ({_gib(facts.memory_available_bytes)} free)", style="dim")
        else:
            out.append(f"\n  {gpu} {_gib(facts.memory_total_bytes)}G")
            out.append(f" {_gib(facts.memory_available_bytes)} free", style="dim")
        links = facts.connectx_up or [x for x in facts.interfaces if x.rdma_device]
        for iface in links[: 2 if wide and not many else 1]:
            speed = f"{iface.speed_mbps // 1000}G" if iface.speed_mbps else "?"
            state_style = "green" if iface.is_up else "red"
            out.append(f"\n  {iface.netdev:<14} " if wide else f"\n  {iface.netdev} ")
            out.append(iface.state, style=state_style)
            out.append(f" {speed} {iface.ipv4 or ''}" if wide else f" {speed}", style="dim")
        if not links:
            out.append("\n  no ConnectX link up", style="red")
        if wide and not many:
            out.append(
                f"\n  {len(facts.images)} images, {len(facts.models)} cached models", style="dim"
            )
    return out

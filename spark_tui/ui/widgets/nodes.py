"""The node panel: every node's state, GPU, memory, ConnectX links, images and models."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.ui import messages as msg

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


def _one_line(view: NodeView) -> Text:
    """`● sim-spark-1 21/120G` (free/total): a node in one line (narrow, many nodes); a
    node with no ConnectX link up says so after it."""
    facts = view.facts
    if view.outage or view.state != "reachable" or facts is None:
        error = view.state == "error"
        out = Text("✖ " if error else "◌ ", style="red" if error else "yellow")
        out.append(view.name, style="bold")
        what = view.outage or (view.error or "unreachable" if error else "probing…")
        out.append(f" {what}", style="red" if error else "dim")
        return out
    out = Text("● ", style="green")
    out.append(view.name, style="bold")
    out.append(f" {_gib(facts.memory_available_bytes)}/{_gib(facts.memory_total_bytes)}G")
    if not facts.connectx_up:
        out.append(" no link up", style="red")
    return out


def wiring_line(views: list[NodeView]) -> str | None:
    """How the probed nodes are cabled, in one short line (None: fewer than two probed)."""
    # Loaded once nodes are probed, not with the cockpit's first frame.
    from spark_tui.core.wiring import wiring_of

    probed = [v.facts for v in views if v.facts is not None]
    if len(probed) < 2:
        return None
    return wiring_of(probed).short


def render_nodes(views: list[NodeView], wide: bool = True) -> Text:
    """The panel's text: the cabling in one line, then up to four lines per node; with
    more than two nodes, two lines each (its first link only), or one when narrow (and
    no cabling line, so four nodes still fit)."""
    many = len(views) > FULL_NODES
    if not wide and many:
        return Text("\n").join(_one_line(v) for v in views)
    out = Text()
    wiring = wiring_line(views)
    if wiring:
        out.append(f"⇄ {wiring}\n", style="dim")
    for i, view in enumerate(views):
        if i:
            out.append("\n")
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
        out.append(view.name, style="bold")
        out.append(" head" if i == 0 else "", style="dim")
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


class NodePanel(Static, can_focus=True):
    """Shows every node: refreshed whenever a probe returns, and while a node's link is
    down (a state, retried; never a failure)."""

    DEFAULT_CSS = """
    NodePanel { border: round $panel-lighten-2; padding: 0 1; height: 1fr; overflow-y: auto;
                scrollbar-size-vertical: 1; }
    NodePanel:focus { border: round $primary; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.border_title = "Nodes"
        self.views: list[NodeView] = []
        self.message: str | None = None

    def show(self, views: list[NodeView]) -> None:
        self.views = views
        self.message = None
        self._render_views()

    def show_message(self, message: str) -> None:
        """Before the first probe returns (or when discovery failed): say so."""
        self.message = message
        self.update(Text(message, style="dim"))

    def on_resize(self) -> None:
        if self.message is None:
            self._render_views()

    def _render_views(self) -> None:
        wide = self.size.width >= 44 or self.size.width == 0
        self.update(render_nodes(self.views, wide=wide))

    def on_nodes_probed(self, message: msg.NodesProbed) -> None:
        probed = message.probed
        views = []
        for node in probed.nodes:
            error = probed.errors.get(node.name)
            views.append(
                NodeView(
                    name=node.name,
                    state="error" if error else "reachable",
                    facts=None if error else node,
                    error=error[0] if error else None,
                    remedy=error[1] if error else None,
                )
            )
        self.show(views)

    def on_watch_sampled(self, message: msg.WatchSampled) -> None:
        """The watch's reading of a node's memory is newer than the last probe's."""
        sample = message.event
        if not isinstance(sample, ev.NodeMemory) or sample.available is None:
            return
        for view in self.views:
            if view.name == sample.node and view.facts is not None:
                view.facts = dataclasses.replace(
                    view.facts,
                    memory_available_bytes=sample.available,
                    memory_total_bytes=sample.total or view.facts.memory_total_bytes,
                )
        self._render_views()

    def on_node_outage(self, message: msg.NodeOutage) -> None:
        event = message.event
        for view in self.views:
            if view.name == event.node:
                view.outage = f"unreachable since {event.seconds:.0f} s, retrying"
                view.remedy = event.remedy
        self._render_views()

    def on_node_back(self, message: msg.NodeBack) -> None:
        for view in self.views:
            if view.name == message.event.node:
                view.outage = None
                view.remedy = None if view.state != "error" else view.remedy
        self._render_views()

"""The node panel: every node's state, GPU, memory, ConnectX links, images and models."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
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


class NodePanel(Static, can_focus=True):
    """Shows every node: refreshed whenever a probe returns, and while a node's link is
    down (a state, retried; never a failure). Focused, ↑↓ move over the nodes and space
    picks the highlighted one for the next launch or takes it out (`Picked`)."""

    DEFAULT_CSS = """
    NodePanel { border: round $panel-lighten-2; padding: 0 1; height: 1fr; overflow-y: auto;
                scrollbar-size-vertical: 1; }
    NodePanel:focus { border: round $primary; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "previous node", show=False),
        Binding("down", "cursor(1)", "next node", show=False),
        Binding("space", "pick", "pick the node for the launch", id="pick_node", show=False),
    ]

    class Picked(Message):
        """The user changed the nodes the next launch runs on: `names`, head first (empty:
        no pick, every node)."""

        def __init__(self, names: list[str]) -> None:
            super().__init__()
            self.names = names

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.border_title = "Nodes"
        self.views: list[NodeView] = []
        self.message: str | None = None
        # The nodes picked for the next launch, head first (empty: every node), and the
        # highlighted one (drawn while the panel has the focus).
        self.picked: list[str] = []
        self.cursor = 0
        self._starts: list[int] = []

    def show(self, views: list[NodeView]) -> None:
        self.views = views
        self.message = None
        self.cursor = min(self.cursor, max(0, len(views) - 1))
        self._render_views()

    def show_message(self, message: str) -> None:
        """Before the first probe returns (or when discovery failed): say so."""
        self.message = message
        self.update(Text(message, style="dim"))

    def on_resize(self) -> None:
        if self.message is None:
            self._render_views()

    # These run before Textual's own handlers set `has_focus`: the new state is passed.
    def on_focus(self) -> None:
        if self.message is None:
            self._render_views(focused=True)

    def on_blur(self) -> None:
        if self.message is None:
            self._render_views(focused=False)

    def _render_views(self, focused: bool | None = None) -> None:
        focused = self.has_focus if focused is None else focused
        wide = self.size.width >= 44 or self.size.width == 0
        self._starts = []
        cursor = self.cursor if focused and self.views else None
        self.update(render_nodes(self.views, wide, self.picked, cursor, self._starts))
        if self.picked:
            self.border_subtitle = f"{len(self.picked)}/{len(self.views)} picked"
        else:
            self.border_subtitle = "space: pick" if focused and self.views else ""

    def action_cursor(self, step: int) -> None:
        if not self.views:
            return
        self.cursor = max(0, min(len(self.views) - 1, self.cursor + step))
        self._render_views()
        if self.cursor < len(self._starts):
            # Keep the highlighted node in sight in a panel too short for every node.
            line = self._starts[self.cursor]
            if (
                line < self.scroll_y
                or line >= self.scroll_y + self.scrollable_content_region.height
            ):
                self.scroll_to(y=line, animate=False)

    def action_pick(self) -> None:
        if not self.views:
            return
        from spark_tui.core.selection import toggle

        self.set_picked(toggle(self.picked, self.views[self.cursor].name))
        self.post_message(self.Picked(list(self.picked)))

    def set_picked(self, names: Sequence[str]) -> None:
        """Show `names` as the pick (head first; empty: every node)."""
        self.picked = list(names)
        if self.message is None:
            self._render_views()

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

"""The node panel: every node's state, GPU, memory, ConnectX links, images and models (its
lines are drawn by spark_tui.ui.widgets.node_lines)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Static

from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.ui import messages as msg
    from spark_tui.ui.widgets.node_lines import NodeView


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
        if not self.views:
            # Drawn before any probe (the first frame): nothing to draw yet.
            self.update(Text())
        else:
            from spark_tui.ui.widgets.node_lines import render_nodes

            cursor = self.cursor if focused else None
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
        from spark_tui.ui.widgets.node_lines import NodeView

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

"""The log area: one LogPane per rank, side by side up to two ranks, in tabs beyond (each
tab marked with its rank's state)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from textual.containers import Container, Horizontal

from spark_tui.ui.widgets.logpane import LogPane

if TYPE_CHECKING:
    from textual.widget import Widget

    from spark_tui.ui import messages as msg

# Side by side up to this many ranks; tabs beyond.
SIDE_BY_SIDE = 2
TAB_MARKS = {"ready": "✓", "failed": "✗", "loading": "…", "stopped": "■"}


class RankPanes(Container):
    """Holds the panes of the ranks shown now (`panes`, by rank); marks the tabs."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.panes: dict[int, LogPane] = {}

    @property
    def tabbed(self) -> bool:
        return len(self.panes) > SIDE_BY_SIDE

    def build(self, ranks: list[tuple[int, str]]) -> dict[int, LogPane]:
        """New panes for (rank, node) pairs, the first one the head's."""
        self.remove_children()
        self.panes = {
            rank: LogPane(rank, node, role="head" if i == 0 else None)
            for i, (rank, node) in enumerate(ranks)
        }
        if not self.tabbed:
            self.mount(Horizontal(*self.panes.values()))
            return self.panes
        from textual.widgets import TabbedContent, TabPane

        tabs = TabbedContent(id="rank-tabs")
        for rank, pane in self.panes.items():
            # Given before mounting, as `with TabbedContent():` does in compose.
            tabs.compose_add_child(TabPane(f"rank {rank}", pane, id=f"tab-{rank}"))
        self.mount(tabs)
        return self.panes

    def mark_tab(self, rank: int, state: str) -> None:
        if not self.tabbed:
            return
        from textual.widgets import TabbedContent

        with contextlib.suppress(Exception):
            tab = self.query_one("#rank-tabs", TabbedContent).get_tab(f"tab-{rank}")
            tab.label = f"rank {rank} {TAB_MARKS.get(state, '')}".rstrip()

    def current(self, focused: Widget | None) -> LogPane | None:
        """The pane the user is in: the focused one, else the active tab's, else the first."""
        pane = next(
            (n for n in (focused.ancestors_with_self if focused else []) if isinstance(n, LogPane)),
            None,
        )
        if pane is None and self.tabbed:
            from textual.widgets import TabbedContent

            with contextlib.suppress(Exception):
                active = self.query_one("#rank-tabs", TabbedContent).active
                pane = self.panes.get(int(active.removeprefix("tab-")))
        return pane or next(iter(self.panes.values()), None)

    def set_filter(self, text: str) -> None:
        for pane in self.panes.values():
            pane.filter_text = text

    def toggle_compact(self) -> bool:
        compact = not all(p.compact for p in self.panes.values())
        for pane in self.panes.values():
            pane.compact = compact
        return compact

    # ------------------------------------------------------------ messages
    def on_rank_changed(self, message: msg.RankChanged) -> None:
        self.mark_tab(message.event.rank, message.event.state.value)

    def on_cluster_stopped(self, message: msg.ClusterStopped) -> None:
        if message.stopped.cluster_id is None:
            return  # a cluster a launch replaced: the new one's panes stay as they are
        for rank, pane in self.panes.items():
            if pane.state != "failed" and not pane.has_class("failed"):
                self.mark_tab(rank, "stopped")

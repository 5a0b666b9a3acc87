"""The log area: one LogPane per rank, side by side up to two ranks, in tabs beyond (each
tab marked with its rank's state; the first rank that fails is brought forward)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from textual.containers import Container, Horizontal

if TYPE_CHECKING:
    from textual.widget import Widget
    from textual.widgets import TabbedContent

    from spark_tui.ui import messages as msg
    from spark_tui.ui.widgets.logpane import LogPane

# Side by side up to this many ranks; tabs beyond.
SIDE_BY_SIDE = 2
TAB_MARKS = {"ready": "✓", "failed": "✗", "loading": "…", "stopped": "■"}
# A tab's label is "rank N ✓" while every tab fits the width in that form ("rank N" and
# its mark, plus the tab's padding); "rN ✓" beyond, so eight ranks fit 80 columns.
LONG_TAB_WIDTH = 12


class RankPanes(Container):
    """Holds the panes of the ranks shown now (`panes`, by rank); marks the tabs."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.panes: dict[int, LogPane] = {}
        self.tabs: TabbedContent | None = None
        self.short_labels = False
        # The rank brought forward when it failed (one per cluster: the first to fail is
        # the one whose lines explain it; the others' failures follow from it).
        self.brought_forward: int | None = None

    @property
    def tabbed(self) -> bool:
        return len(self.panes) > SIDE_BY_SIDE

    def build(self, ranks: list[tuple[int, str]]) -> dict[int, LogPane]:
        """New panes for (rank, node) pairs, the first one the head's."""
        # Loaded with the first launch: the first frame shows no log pane.
        from spark_tui.ui.widgets.logpane import LogPane

        # The old panes leave at the next refresh, after the new ones are mounted: nothing
        # here may carry a fixed id (it would clash with the leaving one's).
        self.remove_children()
        self.brought_forward = None
        self.panes = {
            rank: LogPane(rank, node, role="head" if i == 0 else None)
            for i, (rank, node) in enumerate(ranks)
        }
        if not self.tabbed:
            self.tabs = None
            self.mount(Horizontal(*self.panes.values()))
            return self.panes
        from textual.widgets import TabbedContent, TabPane

        width = self.size.width or self.app.size.width
        self.short_labels = len(self.panes) * LONG_TAB_WIDTH > width
        self.tabs = TabbedContent(classes="rank-tabs")
        for rank, pane in self.panes.items():
            # Given before mounting, as `with TabbedContent():` does in compose.
            self.tabs.compose_add_child(TabPane(self.tab_label(rank, ""), pane, id=f"tab-{rank}"))
        self.mount(self.tabs)
        return self.panes

    def tab_label(self, rank: int, state: str) -> str:
        name = f"r{rank}" if self.short_labels else f"rank {rank}"
        return f"{name} {TAB_MARKS.get(state, '')}".rstrip()

    def mark_tab(self, rank: int, state: str) -> None:
        if self.tabs is None:
            return
        with contextlib.suppress(Exception):  # the tab may not be mounted yet
            self.tabs.get_tab(f"tab-{rank}").label = self.tab_label(rank, state)

    def bring_forward(self, rank: int) -> None:
        """Show `rank`'s pane: its tab made the active one."""
        if self.tabs is not None and rank in self.panes:
            self.tabs.active = f"tab-{rank}"

    def current(self, focused: Widget | None) -> LogPane | None:
        """The pane the user is in: the focused one, else the active tab's, else the first."""
        shown = list(self.panes.values())
        pane = next(
            (n for n in (focused.ancestors_with_self if focused else []) if n in shown),
            None,
        )
        if pane is None and self.tabs is not None:
            with contextlib.suppress(ValueError):
                pane = self.panes.get(int(self.tabs.active.removeprefix("tab-")))
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
        event = message.event
        self.mark_tab(event.rank, event.state.value)
        if event.state.value == "failed" and self.brought_forward is None:
            self.brought_forward = event.rank
            self.bring_forward(event.rank)

    def on_cluster_stopped(self, message: msg.ClusterStopped) -> None:
        if message.stopped.cluster_id is None:
            return  # a cluster a launch replaced: the new one's panes stay as they are
        for rank, pane in self.panes.items():
            if pane.state != "failed" and not pane.has_class("failed"):
                self.mark_tab(rank, "stopped")

"""The Ray cluster of a vllm-ray launch while it forms: nodes joined of those expected, and
the cluster's resources (CPUs, GPUs, memory, object store) as `ray status` reports them.

One line above the log panes, shown from the launch's first `RayClusterState` event on
(a launch without Ray never shows it) until the next launch or a stop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.message import Message
from textual.widgets import Static

if TYPE_CHECKING:
    from spark_tui.service.events import RayClusterState

GIB = 1024**3


class RayStateChanged(Message, bubble=False):
    """`ray status` on the head showed a change (nodes joined, resources); sent to the
    panel, which shows it."""

    def __init__(self, event: RayClusterState) -> None:
        super().__init__()
        self.event = event


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def resources_text(resources: dict[str, float]) -> str:
    """`CPU 40 · GPU 2 · memory 188.4 GiB · object store 80.7 GiB` (what Ray has of each)."""
    parts = []
    for key, label in (("CPU", "CPU"), ("GPU", "GPU")):
        if key in resources:
            parts.append(f"{label} {_count(resources[key])}")
    for key, label in (("memory", "memory"), ("object_store_memory", "object store")):
        if key in resources:
            parts.append(f"{label} {resources[key] / GIB:.1f} GiB")
    return " · ".join(parts) or "no resources reported yet"


def render_ray(event: RayClusterState) -> Text:
    """One line: forming or formed, a mark per node (joined or not), the resources."""
    joined, expected = event.nodes_joined, event.nodes_expected
    text = Text("Ray cluster ", style="bold")
    if event.formed:
        text.append(f"formed: {joined} of {expected} nodes joined ", style="bold green")
    else:
        text.append(f"forming: {joined} of {expected} nodes joined ", style="bold yellow")
    text.append("■" * min(joined, expected), style="green")
    text.append("□" * max(0, expected - joined), style="dim")
    text.append(f"  {resources_text(event.resources)}")
    if event.formed:
        text.append("  (vllm serve starts on the head)", style="dim")
    return text


class RayStatePanel(Static):
    """The forming Ray cluster's line (hidden until a Ray launch reports its state)."""

    DEFAULT_CSS = """
    RayStatePanel { height: auto; padding: 0 1; background: $panel 40%; display: none; }
    RayStatePanel.-shown { display: block; }
    """

    def __init__(self, **kw: object) -> None:
        super().__init__("", **kw)  # type: ignore[arg-type]
        self.state: RayClusterState | None = None

    def show(self, event: RayClusterState) -> None:
        self.state = event
        self.update(render_ray(event))
        self.add_class("-shown")

    def on_ray_state_changed(self, message: RayStateChanged) -> None:
        self.show(message.event)

    def clear(self) -> None:
        self.state = None
        self.update("")
        self.remove_class("-shown")

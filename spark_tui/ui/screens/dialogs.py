"""Small modal dialogs: confirm, host key, a long outage, quit with a running cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

if TYPE_CHECKING:
    from spark_tui.service.events import NodeUnreachable

DIALOG_CSS = """
Dialog, HostKeyDialog, OutageDialog, QuitDialog { align: center middle; }
.dialog { width: 76; max-width: 96%; height: auto; max-height: 96%; border: round $primary;
          background: $surface; padding: 0 1; }
.dialog .title { text-style: bold; color: $primary; margin-bottom: 1; }
.dialog .body { height: auto; max-height: 16; overflow-y: auto; }
.dialog Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
.dialog Button { margin-left: 2; min-width: 8; }
"""


class Dialog(ModalScreen[bool]):
    """Yes/no question; `y` answers yes, `n`/Esc no; Enter presses the focused button: the
    question's default (No unless `default`), as Enter at the terminal's prompt."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS = [  # noqa: RUF012
        Binding("y", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(
        self, title: str, body: Text | str, yes: str = "Yes", no: str = "No", default: bool = False
    ) -> None:
        super().__init__()
        self.title_text, self.body, self.yes, self.no = title, body, yes, no
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="title", markup=False)
            yield Static(self.body, classes="body", markup=False)
            with Horizontal():
                yield Button(f"{self.no} \\[n]", id="no", compact=True)
                yield Button(f"{self.yes} \\[y]", id="yes", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one("#yes" if self.default else "#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class HostKeyDialog(Dialog):
    """An unknown host key: show its fingerprint and ask before trusting it."""

    def __init__(self, host: str, fingerprint: str, known_hosts: str | None = None) -> None:
        self.host, self.fingerprint = host, fingerprint
        body = Text()
        body.append(f"The host key of {host} is not in known_hosts.\n\n")
        body.append("Fingerprint: ", style="dim")
        body.append(fingerprint + "\n\n", style="bold")
        body.append(
            "Compare it with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on that node.\n"
            f"Yes adds it to {known_hosts or 'known_hosts'}; no leaves the node unreachable."
        )
        super().__init__(f"Trust {host}?", body, yes="Trust", no="Refuse")


class OutageDialog(Dialog):
    """A node unreachable past the give-up budget: keep waiting (no), or stop watching
    (yes: the ranks are left as they are)."""

    def __init__(self, event: NodeUnreachable) -> None:
        body = Text(f"{event.node} has not answered for {event.seconds:.0f} s ({event.reason}).\n")
        body.append(
            f"Its rank(s) {', '.join(map(str, event.ranks))} are not failed for it and are "
            "left running. spark-tui keeps retrying while you wait.\n"
        )
        body.append(f"→ {event.remedy}\n\n", style="dim")
        body.append(
            "Stop watching: the ranks are left as they are; `spark-tui status` shows them "
            "and `spark-tui stop` removes them once the node answers."
        )
        super().__init__(f"{event.node} unreachable", body, yes="Stop watching", no="Keep waiting")


class QuitDialog(ModalScreen[str]):
    """Quitting while a cluster runs: stop it, leave it running, or stay."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS = [  # noqa: RUF012
        Binding("s", "choose('stop')", "stop"),
        Binding("l", "choose('leave')", "leave"),
        Binding("c,escape", "choose('cancel')", "cancel"),
    ]

    def __init__(self, cluster_id: str, reattach_hint: str) -> None:
        super().__init__()
        self.cluster_id, self.hint = cluster_id, reattach_hint

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(
                f"Cluster {self.cluster_id} is still running", classes="title", markup=False
            )
            yield Static(
                "Stop it (every rank's container is removed), or leave it running.\n"
                f"To come back to it later: {self.hint}",
                classes="body",
                markup=False,
            )
            with Horizontal():
                yield Button("Cancel \\[c]", id="cancel", compact=True)
                yield Button("Leave running \\[l]", id="leave", compact=True)
                yield Button("Stop and quit \\[s]", id="stop", variant="error", compact=True)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "cancel")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

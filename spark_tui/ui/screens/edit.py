"""Edit one setting: key and value, validated as typed, with a fit preview."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from spark_tui.ui.screens.dialogs import DIALOG_CSS

# (key, value) -> (error message or None, preview text)
Preview = Callable[[str, str], tuple[str | None, Text]]


class EditSettingDialog(ModalScreen[tuple[str, str] | None]):
    """Returns (key, value) when the change validates and the user applies it."""

    DEFAULT_CSS = (
        DIALOG_CSS
        + """
    EditSettingDialog { align: center middle; }
    EditSettingDialog Input { margin-bottom: 1; }
    EditSettingDialog #edit-preview { height: auto; max-height: 12; }
    """
    )
    BINDINGS = [Binding("escape", "cancel", "cancel")]  # noqa: RUF012

    def __init__(self, keys: list[str], current: dict[str, object], preview: Preview) -> None:
        super().__init__()
        self.keys, self.current, self.preview = keys, current, preview

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Change one setting (applied to every rank)", classes="title")
            yield Input(placeholder="setting, e.g. max_num_seqs", id="edit-key")
            yield Input(placeholder="new value", id="edit-value")
            yield Static(
                Text("known: " + ", ".join(self.keys[:14]), style="dim"), id="edit-preview"
            )
            with Horizontal():
                yield Button("Cancel [esc]", id="cancel")
                yield Button("Relaunch [enter]", id="apply", variant="primary", disabled=True)

    def on_mount(self) -> None:
        self.query_one("#edit-key", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        key = self.query_one("#edit-key", Input).value.strip()
        value = self.query_one("#edit-value", Input).value.strip()
        body = self.query_one("#edit-preview", Static)
        apply = self.query_one("#apply", Button)
        if event.input.id == "edit-key" and key in self.current:
            body.update(Text(f"{key} is now {self.current[key]!r}", style="dim"))
        if not key or not value:
            apply.disabled = True
            return
        error, preview = self.preview(key, value)
        apply.disabled = error is not None
        body.update(Text(error, style="red") if error else preview)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "edit-key":
            self.query_one("#edit-value", Input).focus()
        elif not self.query_one("#apply", Button).disabled:
            self._apply()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self._apply()
        else:
            self.dismiss(None)

    def _apply(self) -> None:
        key = self.query_one("#edit-key", Input).value.strip()
        value = self.query_one("#edit-value", Input).value.strip()
        self.dismiss((key, value))

    def action_cancel(self) -> None:
        self.dismiss(None)

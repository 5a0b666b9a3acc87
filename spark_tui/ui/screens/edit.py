"""Edit one setting: key and value, validated as typed, with a fit preview."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static

from spark_tui.ui.screens.dialogs import DIALOG_CSS

# (key, value) -> (error message or None, preview text)
Preview = Callable[[str, str], tuple[str | None, Text]]


class EditSettingDialog(ModalScreen[tuple[str, str] | None]):
    """Returns (key, value) when the change validates and the user applies it."""

    DEFAULT_CSS = (
        DIALOG_CSS
        + """
    EditSettingDialog { align: center middle; }
    EditSettingDialog .row { height: 1; margin-bottom: 1; }
    EditSettingDialog .row Label { width: 9; color: $text-muted; }
    EditSettingDialog .row Input { width: 1fr; }
    EditSettingDialog #edit-now { height: 1; color: $text-muted; }
    EditSettingDialog #edit-preview { height: auto; max-height: 9; }
    """
    )
    BINDINGS = [Binding("escape", "cancel", "cancel")]  # noqa: RUF012

    def __init__(
        self,
        keys: list[str],
        current: dict[str, object],
        preview: Preview,
        *,
        recipe: str = "",
        key: str = "",
    ) -> None:
        super().__init__()
        self.keys, self.current, self.preview = keys, current, preview
        self.recipe, self.initial_key = recipe, key

    def compose(self) -> ComposeResult:
        title = f"Change one setting of {self.recipe}" if self.recipe else "Change one setting"
        with Vertical(classes="dialog"):
            yield Static(title + " (same change on every rank)", classes="title", markup=False)
            with Horizontal(classes="row"):
                yield Label("setting")
                yield Input(
                    value=self.initial_key,
                    placeholder="e.g. max_num_seqs (→ completes)",
                    suggester=SuggestFromList(self.keys, case_sensitive=False),
                    id="edit-key",
                    compact=True,
                )
            with Horizontal(classes="row"):
                yield Label("value")
                yield Input(placeholder="new value", id="edit-value", compact=True)
            yield Static("", id="edit-now", markup=False)
            yield Static(self._known(), id="edit-preview", markup=False)
            with Horizontal():
                yield Button("Cancel \\[esc]", id="cancel", compact=True)
                yield Button(
                    "Relaunch \\[enter]", id="apply", variant="primary", disabled=True, compact=True
                )

    def _known(self) -> Text:
        return Text("tunable: " + ", ".join(self.keys[:9]), style="dim")

    def on_mount(self) -> None:
        self.query_one("#edit-key", Input).focus()
        if self.initial_key:
            self._update()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._update()

    def _update(self) -> None:
        key = self.query_one("#edit-key", Input).value.strip()
        value = self.query_one("#edit-value", Input).value.strip()
        now = self.query_one("#edit-now", Static)
        body = self.query_one("#edit-preview", Static)
        apply = self.query_one("#apply", Button)
        if key in self.current:
            now.update(Text(f"{key} is now {self.current[key]!r}"))
        else:
            now.update("")
        if not key or not value:
            apply.disabled = True
            body.update(self._known() if not key else Text("type the new value", style="dim"))
            return
        error, preview = self.preview(key, value)
        apply.disabled = error is not None
        body.update(Text(error, style="bold red") if error else preview)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "edit-key":
            # Enter on a partly typed name takes the completion shown after the cursor.
            suggestion = getattr(event.input, "_suggestion", "")
            if suggestion and suggestion != event.input.value:
                event.input.value = suggestion
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

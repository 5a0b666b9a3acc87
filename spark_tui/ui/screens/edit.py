"""Edit one setting: key and value, validated as typed, with a fit preview. Values
separated by commas make it a sweep: each value in turn, with targets and an objective."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Change:
    """What the dialog returns: one value, or several (a sweep) with its goal."""

    key: str
    value: str
    targets: tuple[str, ...] = ()
    objective: str = ""

    @property
    def values(self) -> list[str]:
        return [v.strip() for v in self.value.split(",")]

    @property
    def sweep(self) -> bool:
        return "," in self.value


def _sweep_goal(targets: str, objective: str) -> str | None:
    """The error in the targets or the objective as typed (None: they read)."""
    from spark_tui.core.errors import InputError
    from spark_tui.core.sweep import Objective, Target

    try:
        for text in targets.split():
            Target.parse(text)
        if objective.strip():
            Objective.parse(objective.strip())
    except InputError as exc:
        return f"{exc.message} ({exc.remedy})"
    return None


class EditSettingDialog(ModalScreen[Change | None]):
    """Returns the Change when it validates and the user applies it."""

    DEFAULT_CSS = (
        DIALOG_CSS
        + """
    EditSettingDialog { align: center middle; }
    EditSettingDialog .row { height: 1; margin-bottom: 1; }
    EditSettingDialog .row Label { width: 9; color: $text-muted; }
    EditSettingDialog .row Input { width: 1fr; }
    EditSettingDialog #edit-now { height: 1; color: $text-muted; }
    EditSettingDialog #edit-preview { height: auto; max-height: 9; }
    EditSettingDialog .sweep { display: none; }
    EditSettingDialog.sweeping .sweep { display: block; }
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
                yield Input(
                    placeholder="new value (4,8,16: a sweep)", id="edit-value", compact=True
                )
            with Horizontal(classes="row sweep"):
                yield Label("targets")
                yield Input(
                    placeholder="e.g. ttft_p95<=2s@c8 itl_p95<=80ms@c8",
                    id="edit-targets",
                    compact=True,
                )
            with Horizontal(classes="row sweep"):
                yield Label("maximize")
                yield Input(
                    placeholder="tok_s (default), e.g. tok_s@c8", id="edit-objective", compact=True
                )
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
        sweeping = "," in value
        self.set_class(sweeping, "sweeping")
        apply.label = "Sweep \\[enter]" if sweeping else "Relaunch \\[enter]"
        if sweeping:
            error, preview = self._sweep_preview(key, value)
        else:
            error, preview = self.preview(key, value)
        apply.disabled = error is not None
        body.update(Text(error, style="bold red") if error else preview)

    def _sweep_preview(self, key: str, value: str) -> tuple[str | None, Text]:
        """Each value checked as one change is; the targets and the objective read."""
        values = [v.strip() for v in value.split(",")]
        if len(values) < 2 or any(not v for v in values):
            return "list two or more values, with nothing between two commas", Text()
        for v in values:
            error, _ = self.preview(key, v)
            if error:
                return f"{key}={v}: {error}", Text()
        targets = self.query_one("#edit-targets", Input).value
        objective = self.query_one("#edit-objective", Input).value
        error = _sweep_goal(targets, objective)
        if error:
            return error, Text()
        text = Text(f"sweep of {len(values)} values of {key}: ", style="bold")
        text.append(
            "each relaunches every rank, is checked, smoked and benchmarked against one "
            "baseline; a value that does not start is a row with its reason. Esc during the "
            "sweep asks what to leave running.",
        )
        return None, text

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id in ("edit-targets", "edit-objective"):
            if not self.query_one("#apply", Button).disabled:
                self._apply()
            return
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
        if "," not in value:
            self.dismiss(Change(key, value))
            return
        targets = tuple(self.query_one("#edit-targets", Input).value.split())
        objective = self.query_one("#edit-objective", Input).value.strip()
        self.dismiss(Change(key, ",".join(v.strip() for v in value.split(",")), targets, objective))

    def action_cancel(self) -> None:
        self.dismiss(None)

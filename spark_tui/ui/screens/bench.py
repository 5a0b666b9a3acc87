"""The benchmark's settings before it runs: concurrency, the workload, repeats."""

from __future__ import annotations

import dataclasses

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from spark_tui.core.errors import SparkError
from spark_tui.service.bench import BenchConfig, BenchSettings
from spark_tui.ui.screens.dialogs import DIALOG_CSS

# (field of BenchSettings, label, placeholder)
FIELDS = (
    ("concurrency", "concurrency", "1,4,8"),
    ("prompt_tokens", "prompt tokens", "256, 128-512 or normal:256,64[,32-1024]"),
    ("output_tokens", "output tokens", "128, 64-256 or normal:128,32"),
    ("workload_file", "workload file", "JSON lines of prompt_tokens/prompt, output_tokens"),
    ("shared_prefix", "shared prefix", "share of every prompt in common: 0 to 0.95"),
    ("context_depths", "context depths", "tokens already in context: 0,4k,16k"),
    ("goodput", "goodput", "per-request targets: ttft<=2s itl<=80ms latency<=30s"),
    ("repeats", "repeats", "each level N times (95 % confidence interval)"),
    ("requests_per_level", "requests/level", "0: twice the concurrency"),
    ("seed", "seed", "the same seed, the same lengths"),
)


class BenchDialog(ModalScreen[BenchConfig | None]):
    """Returns the BenchConfig of the settings typed (checked on Enter), None on Esc."""

    DEFAULT_CSS = (
        DIALOG_CSS
        + """
    BenchDialog { align: center middle; }
    BenchDialog .title { margin-bottom: 0; }
    BenchDialog .row { height: 1; margin-top: 0; }
    BenchDialog .row Label { width: 16; color: $text-muted; }
    BenchDialog .row Input { width: 1fr; }
    BenchDialog #bench-error { height: auto; max-height: 3; }
    BenchDialog Horizontal.buttons { margin-top: 0; }
    """
    )
    BINDINGS = [Binding("escape", "cancel", "cancel")]  # noqa: RUF012

    def __init__(self, settings: BenchSettings, run_key: str = "Enter") -> None:
        super().__init__()
        self.settings = settings
        self.run_key = run_key

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(
                "Benchmark: the workload to measure (Enter runs, Esc cancels)",
                classes="title",
                markup=False,
            )
            for name, label, hint in FIELDS:
                with Horizontal(classes="row"):
                    yield Label(label)
                    yield Input(
                        value=str(getattr(self.settings, name)),
                        placeholder=hint,
                        id=f"bench-{name}",
                        compact=True,
                    )
            yield Static("", id="bench-error", markup=False)
            with Horizontal(classes="buttons"):
                yield Button("Cancel \\[esc]", id="cancel", compact=True)
                yield Button("Run \\[enter]", id="run", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one(f"#bench-{FIELDS[0][0]}", Input).focus()

    def typed(self) -> BenchSettings:
        """The settings as typed now."""
        values = {name: self.query_one(f"#bench-{name}", Input).value for name, _, _ in FIELDS}
        return dataclasses.replace(self.settings, **values)

    def _run(self) -> None:
        try:
            config = self.typed().config()
        except SparkError as exc:
            error = Text(exc.message, style="bold red")
            error.append(f"\n→ {exc.remedy}", style="dim")
            self.query_one("#bench-error", Static).update(error)
            return
        self.dismiss(config)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._run()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run":
            self._run()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

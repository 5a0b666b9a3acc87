"""The `/` filter line: a regular expression for the recipes or the logs, applied as typed;
one that is not a regular expression is said, and matched as plain text."""

from __future__ import annotations

import re
from collections.abc import Callable

from textual.widget import Widget
from textual.widgets import Input


class FilterBox(Input):
    """Shown by `show_for`; Enter keeps the filter, `close(clear=True)` (Esc) empties it;
    either way the focus goes back to what was filtered."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(compact=True, **kwargs)  # type: ignore[arg-type]
        self.target = "logs"
        self._apply: Callable[[str], None] = lambda _text: None
        self._back: Callable[[], Widget | None] = lambda: None

    @property
    def is_open(self) -> bool:
        return self.has_class("visible")

    def show_for(
        self,
        target: str,
        value: str,
        apply: Callable[[str], None],
        back: Callable[[], Widget | None],
    ) -> None:
        """Filter `target` ("recipes" or "logs"): `apply(text)` as typed, then focus `back()`."""
        self.target, self._apply, self._back = target, apply, back
        self.value = value
        self.placeholder = f"/ filter {target} (regex); Enter keeps it, Esc clears"
        self.add_class("visible")
        self.focus()

    def close(self, *, clear: bool = False) -> None:
        if clear:
            self.value = ""
        self._done()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._apply(event.value)
        try:
            re.compile(event.value)
        except re.error as exc:
            self.add_class("-invalid")
            self.tooltip = f"not a regular expression ({exc}): matching it as plain text"
            return
        self.remove_class("-invalid")
        self.tooltip = None

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._done()

    def _done(self) -> None:
        self.remove_class("visible")
        back = self._back()
        if back is not None:
            back.focus()

"""The cockpit's need of a terminal (its own module: the demo's first frame checks it and
needs nothing else of the headless commands')."""

from __future__ import annotations

import sys

from spark_tui.core.errors import InputError


def require_terminal(command: str) -> None:
    """Raise an InputError when stdin or stdout is not a terminal (a pipe, /dev/null, a file)."""
    missing = [
        name
        for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
        if stream is None or not stream.isatty()
    ]
    if missing:
        raise InputError(
            f"`{command}` needs a terminal, but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not one",
            "run it in a terminal (over SSH: `ssh -t`); without one, use the headless "
            "commands: `spark-tui sim` for simulated Sparks, then probe, check, launch, "
            "smoke, bench with --inventory",
        )

"""What a rank's container runs before `vllm serve`: the recipe's `pre_exec` commands and
its mods, as a small `sh` wrapper that then execs the serve command.

The wrapper is the container's entrypoint: `/bin/sh -c SCRIPT spark-tui-prelaunch`, with the
serve argv as the container command, so the argv stays a list (its `${NAME}` references
are resolved by the launch as before) and reaches vLLM through `exec "$@"` unchanged.
Every value in SCRIPT is `shlex.quote`d. Each step runs in a subshell (a mod's `cd` does
not move the serve command), prints a marker line before it, and a failing step ends the
container with its exit code after a marker naming it: the launch reports that as the
rank's failure, with the step's own lines (see `failed_step`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from spark_tui.core.recipe import PrelaunchStep, Recipe

ENTRY_NAME = "spark-tui-prelaunch"  # $0 of the wrapper, as `ps` shows it
# The marker line's start: before each step and on failure (core.logclass recognizes it;
# defined here so that building a plan does not compile the log classifier's patterns).
MARK = "spark-tui prelaunch:"
_START = re.compile(re.escape(MARK) + r" (?P<what>.+?): start$")
_FAILED = re.compile(re.escape(MARK) + r" (?P<what>.+?) failed with exit code (?P<code>\d+)")


def _what(step: PrelaunchStep, index: int) -> str:
    if step.mod:
        return f"mod {step.mod}"
    return f"pre_exec {index + 1}"


def exec_steps(steps: Sequence[PrelaunchStep]) -> list[tuple[str, str]]:
    """(label, shell command) of every exec step, in order: `mod NAME` or `pre_exec N`."""
    out = []
    for i, step in enumerate(steps):
        if step.kind == "exec":
            out.append((_what(step, i), step.command))
    return out


def wrapper_script(steps: Sequence[PrelaunchStep]) -> str:
    """The `sh -c` script: each exec step in a subshell, then `exec "$@"` (the serve argv)."""
    lines = ["set -u"]
    for label, command in exec_steps(steps):
        start = shlex.quote(f"{MARK} {label}: start")
        failed = shlex.quote(f"{MARK} {label} failed with exit code ")
        lines.append(f"echo {start}")
        # The command is one quoted word for a child `sh -c`: its text is never re-parsed here.
        # Its stderr joins stdout, so its lines stay in order before its failure marker.
        lines.append(
            f'sh -c {shlex.quote(command)} 2>&1 || {{ rc=$?; echo {failed}"$rc"; exit "$rc"; }}'
        )
    lines.append(f"echo {shlex.quote(f'{MARK} done; starting the serve command')}")
    lines.append('exec "$@"')
    return "\n".join(lines)


def entrypoint(steps: Sequence[PrelaunchStep]) -> list[str] | None:
    """The container entrypoint that runs the steps, or None when there are none."""
    if not exec_steps(steps):
        return None
    return ["/bin/sh", "-c", wrapper_script(steps), ENTRY_NAME]


def copies(steps: Sequence[PrelaunchStep]) -> list[tuple[str, str]]:
    """(control-machine source, container destination) of every copy step."""
    return [(s.source, s.dest) for s in steps if s.kind == "copy"]


@dataclass(frozen=True)
class StepFailure:
    """A prelaunch step that failed in a rank's log: its label, exit code and its lines."""

    what: str
    exit_code: int
    lines: tuple[str, ...]


def failed_step(log: Sequence[str], max_lines: int = 8) -> StepFailure | None:
    """The failed prelaunch step in a rank's log (its output since its start marker, the
    last `max_lines` of it), or None when no step failed."""
    for i in range(len(log) - 1, -1, -1):
        m = _FAILED.search(log[i])
        if not m:
            continue
        what = m.group("what")
        start = 0
        for j in range(i - 1, -1, -1):
            s = _START.search(log[j])
            if s and s.group("what") == what:
                start = j + 1
                break
        body = [t for t in log[start:i] if t.strip()][-max_lines:]
        return StepFailure(what, int(m.group("code")), (*body, log[i]))
    return None


def findings(recipe: Recipe) -> list[tuple[str, str, str]]:
    """(code, message, remedy) of every mod or `pre_exec` copy the recipe names that was
    not found: blocking, since the serve command would start without it."""
    out = []
    for m in recipe.missing:
        where = "; ".join(m.tried) or "(nowhere: no recipe file or registry to look in)"
        if m.kind == "mod":
            out.append(
                (
                    "mod_not_found",
                    f"mod {m.ref!r} was not found; looked in: {where}",
                    "put the mod folder (with its run.sh) next to the recipe or in its "
                    "registry's mods/ folder, or clone the eugr registry (`sparkrun registry "
                    "update`, or name it under `registries:` in spark-tui's config)",
                )
            )
        else:
            out.append(
                (
                    "pre_exec_copy_not_found",
                    f"pre_exec copy source {m.ref!r} was not found; looked in: {where}",
                    "fix the `copy:` path (relative paths are read from the recipe's folder)",
                )
            )
    return out

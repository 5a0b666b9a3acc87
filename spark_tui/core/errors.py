"""Typed errors a user can meet: each carries a message and a remedy, and an exit code."""

from __future__ import annotations

from collections.abc import Sequence

EXIT_OK = 0
EXIT_FAILED = 1  # the thing checked failed: does not fit, a smoke check failed
EXIT_USAGE = 2  # usage or input error
EXIT_UNREACHABLE = 3  # a node could not be reached

# Longest message or remedy kept: an error quoting a huge user value stays readable.
MAX_TEXT = 2000


def _capped(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[: MAX_TEXT - 40] + f"... ({len(text) - MAX_TEXT + 40:,} characters cut)"


class SparkError(Exception):
    """An error shown to the user as a message plus a remedy, never as a traceback."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, remedy: str) -> None:
        message, remedy = _capped(message), _capped(remedy)
        super().__init__(message)
        self.message = message
        self.remedy = remedy

    def __str__(self) -> str:
        return f"{self.message}\n  remedy: {self.remedy}"


class InputError(SparkError):
    """Bad input from the user: a file, a flag or a value (exit 2)."""


class RecipeError(InputError):
    """A recipe that cannot be found, parsed or rendered."""


class OverrideError(InputError):
    """A `--set key=value` that is unknown, mistyped or out of range."""


class FactsError(InputError):
    """A facts or inventory file that cannot be read."""


class UnreachableError(SparkError):
    """A node that could not be reached (exit 3)."""

    exit_code = EXIT_UNREACHABLE


class OperationFailed(SparkError):
    """An operation that ran and failed: launch, smoke, stop (exit 1)."""

    exit_code = EXIT_FAILED


class NoClusterError(OperationFailed):
    """No cluster of ours runs on the nodes (exit 1: a state of the nodes, not a usage error);
    the remedy is the launch that makes one, on the nodes `where` names as CLI flags. `ended`:
    clusters of ours still there with a rank that exited (failed, or kept for inspection),
    which a launch onto their nodes would meet: they are named, with `status` and `stop`."""

    MESSAGE = "no spark-tui cluster is running on these nodes"

    def __init__(self, where: str = "--inventory FILE", ended: Sequence[str] = ()) -> None:
        launch = f"`spark-tui launch RECIPE {where} --wait`"
        if ended:
            ids = ", ".join(ended)
            message = f"{self.MESSAGE}: cluster {ids} of ours is there, but a rank of it exited"
            remedy = (
                f"`spark-tui status {where}` says which rank and why; `spark-tui stop {where} "
                f"--cluster {ended[0]}` removes it; then launch again: {launch}"
            )
        else:
            message, remedy = self.MESSAGE, f"launch one first: {launch}"
        super().__init__(message, remedy)
        self.where = where
        self.ended = tuple(ended)

    def for_nodes(self, where: str) -> NoClusterError:
        """The same answer for the nodes as the user named them (`where`, as CLI flags)."""
        return NoClusterError(where, self.ended)


class LaunchFailed(OperationFailed):
    """A rank failed: which one, why, and the log lines that say so."""

    def __init__(
        self, message: str, remedy: str, *, rank: int, node: str, lines: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, remedy)
        self.rank = rank
        self.node = node
        self.lines = lines

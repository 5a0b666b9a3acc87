"""Which of the given nodes a launch runs on.

The user picks them by name, head first (`--on a,b`, or in the cockpit's nodes panel);
without a pick every node given is a candidate, in the order given. A layout of fewer
ranks than candidates runs on the first ones, as sparkrun does: that choice is said, with
the nodes left out and how to pick others, wherever a plan or a fit verdict is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from spark_tui.core.errors import InputError
from spark_tui.core.wording import plural

# How a pick is written on the command line (the remedies show it).
ON_FLAG = "--on"


class Named(Protocol):
    """Anything a node name picks: inventory entries, probed facts."""

    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


def parse_on(text: str) -> list[str]:
    """`--on a,b` as names, head first (spaces around a name are dropped)."""
    names = [part.strip() for part in str(text).split(",")]
    if not any(names):
        raise InputError(
            f"{ON_FLAG} names no node",
            f"name the nodes to run on, head first: {ON_FLAG} spark-a,spark-b",
        )
    if "" in names:
        raise InputError(
            f"{ON_FLAG} {text!r} has an empty name",
            f"separate the names with single commas: {ON_FLAG} spark-a,spark-b",
        )
    return names


def pick(given: Sequence[str], on: Sequence[str] | None) -> list[str]:
    """The names `on` picks out of `given`, in `on`'s order (the head first); every given
    name when `on` is None. An unknown or repeated name is an InputError whose remedy
    lists the names there are."""
    if on is None:
        return list(given)
    on = list(on)
    known = ", ".join(given) or "none"
    if not on:
        raise InputError(
            "no node picked to run on", f"pick at least one, head first; the nodes: {known}"
        )
    repeated = sorted({name for name in on if on.count(name) > 1})
    if repeated:
        raise InputError(
            f"{ON_FLAG} names {', '.join(repeated)} more than once",
            "name every node once (one rank runs per node), head first",
        )
    unknown = [name for name in on if name not in given]
    if unknown:
        what = "is not a node" if len(unknown) == 1 else "are not nodes"
        raise InputError(
            f"{ON_FLAG} names {', '.join(unknown)}, which {what} of the ones given",
            f"use the nodes' names as the inventory (and `spark-tui probe`) gives them: {known}",
        )
    return on


def toggle(picked: Sequence[str], name: str) -> list[str]:
    """The pick with `name` added last (the head when it is the first) or, when it was
    picked, taken out (the others keep their order)."""
    return [n for n in picked if n != name] if name in picked else [*picked, name]


def pick_nodes(nodes: Sequence[N], on: Sequence[str] | None) -> tuple[list[N], list[str] | None]:
    """The nodes `on` picks (see `pick`), in its order, and the names of the ones it leaves
    out, in the order given (None: no pick, every node)."""
    by_name = {node.name: node for node in nodes}
    picked = pick(list(by_name), on)
    if on is None:
        return list(nodes), None
    return [by_name[name] for name in picked], [n for n in by_name if n not in picked]


def choice_text(
    used: Sequence[str], left_out: Sequence[str], *, picked: bool, candidates: int
) -> tuple[str, str]:
    """(what, how to change it) for a launch that runs on `used` and not on `left_out`:
    `picked`, the user picked the `candidates` (else they are every node given), of which
    the layout takes the first."""
    n = len(used)
    if candidates > n:
        how = f"the first {plural(n, 'node')} {'picked' if picked else 'given'}"
    else:
        how = "as picked"
    what = f"runs on {', '.join(used)} ({how}); left out: {', '.join(left_out)}"
    # An example of another pick: the nodes left out first, then the ones used.
    other = ",".join([*left_out, *used][:n])
    change = (
        f"to run on other nodes, name them head first: {ON_FLAG} {other} (in the cockpit: "
        "space on each in the nodes panel)"
    )
    return what, change

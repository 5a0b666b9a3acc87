"""Which nodes a command or cockpit run is about: an inventory file, `--hosts`, or (offline)
a facts file. Plain values in, nodes out: no argparse below the commands."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import FactsError, InputError
from spark_tui.core.selection import parse_on, pick_nodes

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.inventory import InventoryNode


@dataclass(frozen=True)
class Targets:
    """The nodes named by the user: exactly one of inventory, hosts or facts. `hosts_file`
    and `sparkrun_cluster` say where `hosts` came from when the user named a hosts file or
    a sparkrun group instead (the remedies repeat what was typed)."""

    inventory: str | None = None
    hosts: str | None = None
    facts: str | None = None
    accept_new_host_keys: bool = False
    hosts_file: str | None = None
    sparkrun_cluster: str | None = None
    # `--on a,b`: the nodes to run on, head first, by name (None: every node given).
    on: str | None = None

    @property
    def given(self) -> bool:
        return bool(self.inventory or self.hosts or self.facts)

    @property
    def picked(self) -> list[str] | None:
        """The names `--on` picks, head first (None: no pick)."""
        return None if self.on is None else parse_on(self.on)

    def as_flags(self, *, live: bool = False) -> str:
        """The user's own node arguments, quoted for a POSIX shell, for the remedies that
        repeat them. `live`: for a command that needs reachable nodes, where a facts file
        (or nothing given) becomes the placeholder `--inventory FILE`."""
        import shlex

        words: list[str] = []
        if self.inventory:
            words = ["--inventory", self.inventory]
        elif self.hosts_file:
            words = ["--hosts-file", self.hosts_file]
        elif self.sparkrun_cluster:
            words = ["--sparkrun-cluster", self.sparkrun_cluster]
        elif self.hosts:
            words = ["--hosts", self.hosts]
        elif self.facts and not live:
            return shlex.join(["--facts", self.facts])
        else:
            return "--inventory FILE"
        if self.accept_new_host_keys:
            words.append("--accept-new-host-keys")
        return shlex.join(words)

    def command(self, *words: str, live: bool = False) -> str:
        """`spark-tui WORDS...` followed by the user's node arguments (see `as_flags`)."""
        import shlex

        return shlex.join(["spark-tui", *words]) + " " + self.as_flags(live=live)


def inventory_nodes(targets: Targets) -> list[InventoryNode]:
    """The nodes of `--inventory FILE` or `--hosts a,b` that `--on` picks, head first."""
    return picked_inventory(targets)[0]


def picked_inventory(targets: Targets) -> tuple[list[InventoryNode], list[str] | None]:
    """The nodes `--on` picks from `--inventory FILE` or `--hosts a,b`, head first, and
    the ones it leaves out (None: no pick, every node)."""
    given = given_inventory(targets)
    return pick_nodes(given, targets.picked)


def given_inventory(targets: Targets) -> list[InventoryNode]:
    """Every node of `--inventory FILE` or `--hosts a,b`, head first (no pick)."""
    from spark_tui.core.inventory import hosts_to_inventory, parse_inventory

    if targets.inventory:
        path = Path(targets.inventory).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FactsError(
                f"inventory file {targets.inventory!r} does not exist",
                "write one: nodes: [{name: spark-a, host: 10.0.0.1}, "
                "{name: spark-b, host: 10.0.0.2}]",
            ) from None
        except OSError as exc:
            raise FactsError(
                f"cannot read inventory file {targets.inventory!r}: {exc.strerror}",
                "check the path; an inventory is YAML: nodes: [{name, host}, ...]",
            ) from None
        return parse_inventory(text, source=str(targets.inventory))
    if targets.hosts:
        return hosts_to_inventory(str(targets.hosts))
    raise InputError(
        "no nodes given", "pass --inventory FILE or --hosts spark-a,spark-b (head first)"
    )


def load_facts_file(path: str) -> list[NodeFacts]:
    """Nodes from a facts file (what `probe --json` printed), head first."""
    from spark_tui.core.facts import parse_facts

    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FactsError(
            f"facts file {path!r} does not exist",
            "write one with `spark-tui probe --inventory FILE --json > facts.json`",
        ) from None
    except OSError as exc:
        raise FactsError(
            f"cannot read facts file {path!r}: {exc.strerror}", "check the path"
        ) from None
    return parse_facts(text, source=str(path))


def node_facts(
    targets: Targets, run: Callable[[Callable[[], Any]], Any] | None = None
) -> tuple[list[NodeFacts], list[str] | None]:
    """The facts of the nodes `--on` picks (every node named without it), head first, and
    the names it leaves out (None: no pick): read from a facts file offline, else probed
    live, only the picked ones (`run` runs the probe's coroutine; the commands pass the
    runner that handles signals)."""
    if targets.facts:
        return pick_nodes(load_facts_file(targets.facts), targets.picked)
    if not targets.given:
        raise InputError(
            "no nodes given",
            "pass --facts FILE (offline), --inventory FILE or --hosts spark-a,spark-b",
        )
    nodes, unpicked = picked_inventory(targets)
    # Imported only here: the offline path loads neither asyncio nor asyncssh.
    import asyncio

    from spark_tui.remote.probe import probe_nodes

    accept = targets.accept_new_host_keys
    runner = run or (lambda main: asyncio.run(main()))
    return list(runner(lambda: probe_nodes(nodes, accept_new_host_keys=accept))), unpicked

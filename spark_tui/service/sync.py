"""The model sync and the image sync as service actions, and what they did per node.

`models` puts the recipe's model (and its speculative draft model) on every node, `image`
the recipe's container image; both run on the session's pool (`Session.sync_models`,
`Session.sync_image`), probe the nodes first (`Probed`), announce what they sync
(`SyncStarted`) and then pass the operations' updates through unchanged (`SyncStep`,
`SyncProgress`, `SyncDone`, `Notice`, `SyncFinished`): `service.events.SyncEvent`.

`SyncTally` folds those events into one row per node and item (state, bytes, rate, ETA,
and at the end what was done there): the CLI prints it, the cockpit draws it. The gaps a
sync fixes, as fit findings, are service.gaps'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import InputError
from spark_tui.service.discover import discover
from spark_tui.service.events import (
    Notice,
    SyncDone,
    SyncFinished,
    SyncProgress,
    SyncStarted,
    SyncStep,
)

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.model_presence import ModelNeed
    from spark_tui.core.recipe import Recipe
    from spark_tui.service.events import SyncEvent
    from spark_tui.service.pump import Emit
    from spark_tui.service.session import Session

MODELS = "models"
IMAGE = "image"
# A download on the control machine (no Hub CLI on the head) reports as this node.
THIS_MACHINE = "(this machine)"


# -- what a recipe needs --------------------------------------------------------------


def model_needs_of(recipe: Recipe, overrides: Mapping[str, Any]) -> list[ModelNeed]:
    """The model and the draft model the recipe serves with these overrides."""
    from spark_tui.core.model_presence import model_needs
    from spark_tui.core.overrides import apply_overrides
    from spark_tui.core.render import render_argv

    settings = apply_overrides(recipe, dict(overrides))
    return model_needs(recipe, render_argv(recipe, settings))


def image_of(recipe: Recipe) -> str:
    """The recipe's container image; a recipe without one cannot be synced."""
    if not recipe.container:
        raise InputError(
            f"recipe {recipe.name} names no container image",
            f"add `container: IMAGE` to {recipe.name}'s recipe file",
        )
    return recipe.container


# -- the actions (run by Session.sync_models / Session.sync_image) ---------------------


async def _probed(session: Session, emit: Emit[SyncEvent]) -> list[NodeFacts]:
    """Every node connected (an unreachable one is an error: a sync must not skip it) and
    probed; the facts in rank order."""
    return await discover(session, emit, strict=True)


async def sync_models(
    session: Session,
    emit: Emit[SyncEvent],
    recipe: Recipe,
    overrides: Mapping[str, Any],
    *,
    where: str,
    probe_after: bool = False,
) -> bool:
    """The model sync of `recipe` on every node; True when complete everywhere."""
    needs = model_needs_of(recipe, overrides)
    facts = await _probed(session, emit)
    nodes = tuple(n.name for n in session.inventory)
    emit(SyncStarted(MODELS, recipe.name, tuple(n.repo_id for n in needs), nodes))
    session.nodes_changed()
    ok = await session.nodes.model_sync(facts, recipe.name, needs, where, emit=emit)
    if probe_after:
        await discover(session, emit)
    return ok


async def sync_image(
    session: Session,
    emit: Emit[SyncEvent],
    recipe: Recipe,
    *,
    probe_after: bool = False,
) -> bool:
    """The image sync of `recipe` (a sentinel: its newest nightly) on every node; True when
    every node has the head's."""
    image = await session.prepared.images.to_run(image_of(recipe))
    facts = await _probed(session, emit)
    nodes = tuple(n.name for n in session.inventory)
    emit(SyncStarted(IMAGE, recipe.name, (image,), nodes))
    session.nodes_changed()
    ok = await session.nodes.image_sync(facts, image, emit=emit)
    if probe_after:
        await discover(session, emit)
    return ok


# -- what was done, per node and item --------------------------------------------------


@dataclass
class SyncRow:
    """One item on one node: where its transfer is, then what was done."""

    node: str
    item: str
    kind: str = MODELS
    state: str = "waiting"  # waiting, check, download, pull, copy, complete, failed
    done_bytes: int = 0
    total_bytes: int | None = None
    rate_bytes_per_s: float | None = None
    eta_seconds: float | None = None
    message: str = ""  # the last step taken
    role: str = ""  # "source": the others get it from here; "downloaded": from the Hub
    sent_bytes: int = 0
    skipped: int = 0
    source: str = ""
    seconds: float = 0.0
    error: str | None = None
    remedy: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in ("complete", "failed")

    @property
    def fraction(self) -> float | None:
        if self.state == "complete":
            return 1.0
        if not self.total_bytes:
            return None
        return min(1.0, self.done_bytes / self.total_bytes)

    @property
    def outcome(self) -> str:
        """What was done on this node, in a few words."""
        if self.state == "failed":
            return f"failed: {self.error or 'see the messages above'}"
        if self.state != "complete":
            return self.message or "waiting"
        if self.role == "source":
            return "has it: the source for the others"
        if self.role == "downloaded":
            return "downloaded from the Hub here, then sent to the head"
        if self.source == "registry":
            return "pulled from its registry (same image ID as the head's)"
        if self.source:
            return f"copied from {self.source}: {_gb(self.sent_bytes)} in {self.seconds:.0f} s" + (
                f", {self.skipped} file(s) already complete" if self.skipped else ""
            )
        if self.kind == IMAGE:
            return "has it already (same image ID)"
        return f"complete already ({self.skipped} file(s), nothing sent)"

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["outcome"] = self.outcome
        return out


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


@dataclass
class SyncTally:
    """The rows of one or more syncs, built from their events (`apply`)."""

    rows: dict[tuple[str, str], SyncRow] = field(default_factory=dict)
    notices: list[Notice] = field(default_factory=list)
    finished: list[SyncFinished] = field(default_factory=list)
    started: list[SyncStarted] = field(default_factory=list)
    version: int = 0  # counts the events taken (a view redraws when it changed)
    aborted: list[str] = field(default_factory=list)  # syncs that ended on an error
    expected: int = 0  # how many syncs will run (0: as many as started)
    _kind: str = MODELS

    @property
    def done(self) -> bool:
        """Every sync expected (or started) has finished, or ended on an error."""
        ended = len(self.finished) + len(self.aborted)
        return ended >= max(self.expected, len(self.started)) and ended > 0

    @property
    def ok(self) -> bool:
        return self.done and not self.aborted and all(f.ok for f in self.finished)

    def row(self, node: str, item: str) -> SyncRow:
        key = (node, item)
        if key not in self.rows:
            self.rows[key] = SyncRow(node, item, self._kind)
        return self.rows[key]

    def by_node(self) -> dict[str, list[SyncRow]]:
        out: dict[str, list[SyncRow]] = {}
        for row in self.rows.values():
            out.setdefault(row.node, []).append(row)
        return out

    def apply(self, event: object) -> bool:
        """Fold one event in; False when it is not a sync's."""
        if isinstance(event, SyncStarted):
            self.started.append(event)
            self._kind = event.kind
            for node in event.nodes:
                for item in event.items:
                    self.row(node, item)
        elif isinstance(event, SyncStep):
            row = self.row(event.node, event.item)
            row.message = event.message
            if event.action == "check":  # the node the others get it from has it
                row.state, row.role = "complete", "source"
            elif event.node == THIS_MACHINE and event.message.startswith("downloaded"):
                row.state, row.role = "complete", "downloaded"
            elif not row.finished:
                row.state = event.action
                if event.action in ("copy", "download", "pull"):
                    row.done_bytes, row.total_bytes = 0, None
                    row.rate_bytes_per_s = row.eta_seconds = None
        elif isinstance(event, SyncProgress):
            row = self.row(event.node, event.item)
            if not row.finished:
                row.state = event.action
                row.done_bytes, row.total_bytes = event.done_bytes, event.total_bytes
                row.rate_bytes_per_s, row.eta_seconds = event.rate_bytes_per_s, event.eta_seconds
        elif isinstance(event, SyncDone):
            row = self.row(event.node, event.item)
            row.state = "complete"
            row.sent_bytes, row.skipped = event.sent_bytes, event.skipped
            row.source, row.seconds = event.source, event.seconds
            row.done_bytes = max(row.done_bytes, event.sent_bytes)
            row.eta_seconds = None
        elif isinstance(event, Notice):
            self.notices.append(event)
            if event.level == "error":
                self._blame(event)
        elif isinstance(event, SyncFinished):
            self.finished.append(event)
            for row in self.rows.values():
                if row.item not in event.items or row.state == "failed":
                    continue
                # A failed node's row fails; so does any row the failed sync never got to
                # (nothing more comes for it: it must not stay "waiting" or "downloading").
                failed = row.node in event.failed_nodes and not (
                    row.state == "complete" and row.role
                )
                if failed or (not event.ok and not row.finished):
                    last = self._last_error(row.item)
                    row.state = "failed"
                    if last is not None:
                        row.error = row.error or last.message.removeprefix(f"{row.item}: ")
                        row.remedy = row.remedy or last.remedy
        else:
            return False
        self.version += 1
        return True

    def abort(self, message: str, remedy: str | None, kind: str | None = None) -> None:
        """A sync ended on an error before it finished: the error is said with its remedy
        and its rows (of `kind`; None: every row, and no other sync will run) that were not
        finished fail with it, so no row stays "waiting" or "downloading"."""
        self.aborted.append(message)
        self.apply(Notice("error", message, remedy))
        for row in self.rows.values():
            if not row.finished and kind in (None, row.kind):
                row.state, row.error, row.remedy = "failed", message, remedy
        if kind is None:
            self.expected = len(self.finished) + len(self.aborted)

    def _last_error(self, item: str) -> Notice | None:
        """The last error about `item` (its message names it), else the last error."""
        errors = [n for n in reversed(self.notices) if n.level == "error"]
        return next((n for n in errors if item in n.message), errors[0] if errors else None)

    def _blame(self, notice: Notice) -> None:
        """An error naming a node (`NODE: ...`) fails that node's unfinished rows."""
        node, sep, rest = notice.message.partition(": ")
        if not sep:
            return
        for row in self.rows.values():
            if row.node == node and not row.finished:
                if row.item in rest or len(self.by_node().get(node, [])) == 1:
                    row.state = "failed"
                    row.error = rest.removeprefix(f"{row.item}: ")
                    row.remedy = notice.remedy

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document: every row with its outcome, the notices, ok."""
        return {
            "ok": self.ok,
            "syncs": [
                {"kind": s.kind, "recipe": s.recipe, "items": list(s.items), "nodes": list(s.nodes)}
                for s in self.started
            ],
            "nodes": [r.to_dict() for r in self.rows.values()],
            "notices": [
                {"level": n.level, "message": n.message, "remedy": n.remedy} for n in self.notices
            ],
            "failed_nodes": sorted({n for f in self.finished for n in f.failed_nodes}),
        }

"""Discover and probe: connect to every node (an unknown host key is a question to the
user) and read each node's facts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.service.pump import Emit
    from spark_tui.service.session import Session


def host_key_question(host: str, fingerprint: str) -> ev.Question:
    """Trust an unknown host key? (no unless the user says yes)"""
    return ev.Question(
        ev.HOST_KEY,
        "Unknown host key",
        f"The authenticity of {host} can't be established.\n"
        f"Its key fingerprint is {fingerprint}.\nTrust it and connect?",
        default=False,
        yes_label="Trust",
        data={"host": host, "fingerprint": fingerprint},
    )


def unreachable(facts: list[NodeFacts]) -> dict[str, tuple[str, str | None]]:
    """The error (message, remedy) of each node the probe could not read at all."""
    errors: dict[str, tuple[str, str | None]] = {}
    for node in facts:
        if node.errors and node.memory_total_bytes is None:
            message, _, remedy = node.errors[0].partition(" (remedy: ")
            errors[node.name] = (message, remedy.rstrip(")") or None)
    return errors


async def discover(
    session: Session, emit: Emit[ev.DiscoverEvent], *, strict: bool = False
) -> list[NodeFacts]:
    """Connect (again) and probe every node; the session keeps the facts: Probed.
    `strict`: an unreachable node is an error (a launch or a sync must not skip one)."""
    await session.connect(strict=strict)
    mark = session.probe_mark()
    facts = list(await session.nodes.probe())
    session.facts = facts
    session.errors = unreachable(facts)
    session.probed(mark)
    emit(ev.Probed(list(facts), dict(session.errors)))
    return facts

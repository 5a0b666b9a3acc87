"""The smoke action: health, models, chat, tool-call and streaming checks of a running
service, the same checks and records for both interfaces."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui.core.timeouts import SMOKE_TIMEOUT_S
from spark_tui.ops.smoke import SmokeResult, server_unreachable
from spark_tui.service import events as ev
from spark_tui.service.api import find_target

# The smoke checks' types, as the interfaces see them.
__all__ = ["SmokeResult", "run_smoke", "server_unreachable", "smoke"]

if TYPE_CHECKING:
    from spark_tui.service.api import ApiTarget
    from spark_tui.service.pump import Emit
    from spark_tui.service.session import Session


async def run_smoke(
    session: Session, emit: Emit[ev.SmokeEvent], target: ApiTarget, timeout: float = SMOKE_TIMEOUT_S
) -> list[SmokeResult]:
    """Every smoke check against `target`: SmokeChecked each, recorded, then SmokeDone."""
    results = await session.nodes.smoke_checks(
        target, timeout, lambda result: emit(ev.SmokeChecked(result))
    )
    run_id = None
    try:
        run = session.history.record_smoke(
            results, launch=target.launch, base_url=target.base_url, model=target.model
        )
        run_id = run.id
        emit(ev.Recorded("smoke", run.id))
    except OSError as exc:
        emit(ev.Recorded("smoke", None, f"the smoke run was not recorded: {exc}"))
    emit(ev.SmokeDone(target.base_url, results, run_id))
    return results


async def smoke(
    session: Session,
    emit: Emit[ev.SmokeEvent],
    *,
    base_url: str | None = None,
    model: str | None = None,
    timeout: float = SMOKE_TIMEOUT_S,
) -> None:
    """The smoke action: find the API (see `api.find_target`), check it."""
    target = await find_target(session, base_url, model)
    emit(ev.Notice("info", f"smoke checks against {target.base_url}"))
    await run_smoke(session, emit, target, timeout)

"""The smoke checks and the benchmark of a running service, as the session runs them for
both interfaces: the same checks, the same benchmark settings, the same records."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from spark_tui.core.errors import OperationFailed, UnreachableError
from spark_tui.service import events as ev

if TYPE_CHECKING:
    from spark_tui.ops.bench import BenchConfig
    from spark_tui.ops.history import Run
    from spark_tui.ops.smoke import SmokeResult
    from spark_tui.service.pump import Emit
    from spark_tui.service.session import ApiTarget, Session

SMOKE_TIMEOUT_S = 180.0
# The API paths the cockpit and the CLI call on their own (health and model checks, the
# benchmark's metrics sampling): their access-log lines are ours, not the user's traffic.
OWN_REQUEST_PATHS = ("/metrics", "/health", "/v1/models")


def is_own_request(line: ev.LogLine) -> bool:
    """An access-log line of one of our own polling requests (see OWN_REQUEST_PATHS), or of
    the watch's tiny request (marked by its query, which the server ignores)."""
    from spark_tui.ops.watch import PROBE_MARK

    if line.scope != "access" or not line.detail:
        return False
    parts = line.detail.split()
    if len(parts) != 3:
        return False
    if parts[0] == "POST" and parts[1].endswith("?" + PROBE_MARK):
        return True
    return parts[0] == "GET" and parts[1] in OWN_REQUEST_PATHS


async def run_smoke(
    session: Session, emit: Emit, target: ApiTarget, timeout: float = SMOKE_TIMEOUT_S
) -> list[SmokeResult]:
    """Every smoke check against `target`: SmokeChecked each, recorded, then SmokeDone."""
    results: list[SmokeResult] = []
    async for result in session._smoke_checks(target, timeout):
        results.append(result)
        emit(ev.SmokeChecked(result))
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
    emit: Emit,
    *,
    base_url: str | None = None,
    model: str | None = None,
    timeout: float = SMOKE_TIMEOUT_S,
) -> None:
    """The smoke action: find the API (see `Session.api_target`), check it."""
    target = await session.api_target(base_url, model)
    emit(ev.Notice("info", f"smoke checks against {target.base_url}"))
    await run_smoke(session, emit, target, timeout)


async def run_bench(
    session: Session, emit: Emit, target: ApiTarget, config: BenchConfig
) -> Run | None:
    """One benchmark of `target` with `config`: progress and levels as events, recorded
    (also when cancelled: what finished is kept), then BenchDone. Returns the record."""
    from spark_tui.ops.bench import BenchError

    bench = session._bench_run(
        target,
        config,
        lambda p: emit(ev.BenchProgressed(p)),
        lambda level: emit(ev.BenchLevel(level.to_dict())),
    )
    emit(
        ev.Notice(
            "info",
            f"benchmark of {target.base_url}: concurrency {list(config.concurrency)}, prompt "
            f"{config.prompt_tokens} tokens, output {config.output_tokens} tokens",
        )
    )
    try:
        await bench.run()
    except asyncio.CancelledError:
        bench.result.cancelled = True
        _record_bench(session, emit, target, bench.result, config)
        raise
    except BenchError as exc:
        err = UnreachableError if exc.unreachable and target.via_cluster else OperationFailed
        raise err(
            f"benchmark failed: {exc}",
            "run the smoke checks against the same server to see which part fails",
        ) from exc
    return _record_bench(session, emit, target, bench.result, config)


def _record_bench(
    session: Session, emit: Emit, target: ApiTarget, result: object, config: BenchConfig
) -> Run | None:
    run = None
    try:
        run = session.history.record_bench(result, launch=target.launch, base_url=target.base_url)
        emit(ev.Recorded("bench", run.id))
    except OSError as exc:
        emit(ev.Recorded("bench", None, f"the benchmark was not recorded: {exc}"))
    emit(ev.BenchDone(result, config, run.id if run else None))  # type: ignore[arg-type]
    return run


async def bench(
    session: Session,
    emit: Emit,
    config: BenchConfig,
    base_url: str | None = None,
    model: str | None = None,
) -> None:
    """The bench action: find the API (see `Session.api_target`), run the sweep."""
    target = await session.api_target(base_url, model)
    await run_bench(session, emit, target, config)

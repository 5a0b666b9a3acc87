"""The bench action: a benchmark sweep of a running service with the session's benchmark
settings (the same in the CLI and the cockpit), recorded in the history."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from spark_tui.core.errors import OperationFailed, UnreachableError
from spark_tui.ops.bench import BenchConfig, BenchProgress, BenchResult
from spark_tui.ops.compare import fmt_figure
from spark_tui.service import events as ev
from spark_tui.service.api import find_target

# The benchmark's types, as the interfaces see them.
__all__ = ["BenchConfig", "BenchProgress", "BenchResult", "bench", "fmt_figure", "run_bench"]

if TYPE_CHECKING:
    from spark_tui.ops.history import Run
    from spark_tui.service.api import ApiTarget
    from spark_tui.service.pump import Emit
    from spark_tui.service.session import Session


async def run_bench(
    session: Session, emit: Emit[ev.BenchEvent], target: ApiTarget, config: BenchConfig
) -> Run | None:
    """One benchmark of `target` with `config`: progress and levels as events, recorded
    (also when cancelled: what finished is kept), then BenchDone. Returns the record."""
    from spark_tui.ops.bench import BenchError

    bench = session.nodes.bench_run(
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
        record_bench(session, emit, target, bench.result, config)
        raise
    except BenchError as exc:
        err = UnreachableError if exc.unreachable and target.via_cluster else OperationFailed
        raise err(
            f"benchmark failed: {exc}",
            "run the smoke checks against the same server to see which part fails",
        ) from exc
    return record_bench(session, emit, target, bench.result, config)


def record_bench(
    session: Session,
    emit: Emit[ev.BenchEvent],
    target: ApiTarget,
    result: BenchResult,
    config: BenchConfig,
) -> Run | None:
    """The benchmark in the history (a failure to write it is said, not raised): BenchDone."""
    run = None
    try:
        run = session.history.record_bench(result, launch=target.launch, base_url=target.base_url)
        emit(ev.Recorded("bench", run.id))
    except OSError as exc:
        emit(ev.Recorded("bench", None, f"the benchmark was not recorded: {exc}"))
    emit(ev.BenchDone(result, config, run.id if run else None))
    return run


async def bench(
    session: Session,
    emit: Emit[ev.BenchEvent],
    config: BenchConfig,
    base_url: str | None = None,
    model: str | None = None,
) -> None:
    """The bench action: find the API (see `api.find_target`), run the sweep."""
    target = await find_target(session, base_url, model)
    await run_bench(session, emit, target, config)

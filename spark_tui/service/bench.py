"""The bench action: a benchmark sweep of a running service with the session's benchmark
settings (the same in the CLI and the cockpit), recorded in the history."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_tui.core.errors import InputError, OperationFailed, SparkError, UnreachableError
from spark_tui.core.link import LinkSummary
from spark_tui.core.wording import depth_label
from spark_tui.core.workload import (
    Workload,
    parse_concurrency,
    parse_depths,
    parse_goodput_target,
    parse_lengths,
    parse_share,
)
from spark_tui.ops.bench import BenchConfig, BenchProgress, BenchResult, BenchUpdate
from spark_tui.ops.compare import TABLE_FIGURES, fmt_figure
from spark_tui.ops.link import LINK_INTERVAL_S
from spark_tui.service import events as ev
from spark_tui.service.api import find_target

# The benchmark's types, as the interfaces see them.
__all__ = [
    "BenchConfig",
    "BenchProgress",
    "BenchResult",
    "BenchSettings",
    "bench",
    "TABLE_FIGURES",
    "fmt_figure",
    "run_bench",
]


@dataclass(frozen=True)
class BenchSettings:
    """The benchmark settings as the user types them (the CLI's flags, the cockpit's bench
    dialog): `config()` checks them and gives the BenchConfig, or an InputError naming the
    setting with its syntax."""

    concurrency: str = "1,4,8"
    prompt_tokens: str = "256"
    output_tokens: str = "128"
    workload_file: str = ""
    shared_prefix: str = "0"
    context_depths: str = "0"
    goodput: str = ""  # targets separated by spaces or commas
    repeats: str = "1"
    requests_per_level: str = "0"
    seed: str = "0"

    @classmethod
    def of(cls, config: BenchConfig) -> BenchSettings:
        """The text of a config's settings (to edit them)."""
        w = config.workload
        return cls(
            concurrency=",".join(map(str, config.concurrency)),
            prompt_tokens=str(w.prompt_tokens),
            output_tokens=str(w.output_tokens),
            workload_file=w.file or "",
            shared_prefix=f"{w.shared_prefix:g}",
            context_depths=",".join(map(depth_label, w.context_depths)),
            goodput=" ".join(map(str, w.goodput)),
            repeats=str(config.repeats),
            requests_per_level=str(config.requests_per_level),
            seed=str(w.seed),
        )

    def config(self) -> BenchConfig:
        from spark_tui.ops.bench import BenchConfig

        repeats = _count(self.repeats, "repeats", 1)
        requests = _count(self.requests_per_level, "requests per level", 0)
        workload = Workload(
            prompt_tokens=parse_lengths(self.prompt_tokens, "prompt tokens"),
            output_tokens=parse_lengths(self.output_tokens, "output tokens"),
            shared_prefix=parse_share(self.shared_prefix),
            context_depths=parse_depths(self.context_depths),
            goodput=tuple(parse_goodput_target(t) for t in self.goodput.replace(",", " ").split()),
            seed=_count(self.seed, "seed", 0),
        )
        if self.workload_file.strip():
            workload = workload.with_file(self.workload_file.strip())
        return BenchConfig(
            concurrency=parse_concurrency(self.concurrency),
            workload=workload,
            requests_per_level=requests,
            repeats=repeats,
        )


def _count(text: str, what: str, least: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        value = least - 1
    if value < least:
        raise InputError(
            f"{what} {text!r} is not a whole number of at least {least}", "pass a count"
        )
    return value


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

    def update(event: BenchUpdate) -> None:
        if isinstance(event, BenchProgress):
            emit(ev.BenchProgressed(event))
        else:
            emit(ev.BenchLevel(event.to_dict()))

    bench = session.nodes.bench_run(target, config, update)
    emit(
        ev.Notice(
            "info",
            f"benchmark of {target.base_url}: concurrency {list(config.concurrency)}, "
            f"{config.workload.summary()}",
        )
    )
    summary = LinkSummary()
    stop = asyncio.Event()
    sampler = _start_sampling(session, emit, target, summary, stop)
    try:
        await bench.run()
    except asyncio.CancelledError:
        bench.result.cancelled = True
        await _stop_sampling(sampler, emit, bench.result, summary)
        record_bench(session, emit, target, bench.result, config)
        raise
    except BenchError as exc:
        await _stop_sampling(sampler, emit, bench.result, summary)
        err = UnreachableError if exc.unreachable and target.via_cluster else OperationFailed
        raise err(
            f"benchmark failed: {exc}",
            "run the smoke checks against the same server to see which part fails",
        ) from exc
    # One last sample: what moved since the one before belongs to the benchmark too.
    stop.set()
    if sampler is not None:
        await asyncio.wait([sampler], timeout=LINK_INTERVAL_S + 5)
    await _stop_sampling(sampler, emit, bench.result, summary)
    return record_bench(session, emit, target, bench.result, config)


def _start_sampling(
    session: Session,
    emit: Emit[ev.BenchEvent],
    target: ApiTarget,
    summary: LinkSummary,
    stop: asyncio.Event,
) -> asyncio.Task[None] | None:
    """Every node's memory and its ranks' link sampled beside the benchmark, when the API is
    our cluster's (another server's nodes are not known)."""
    if not target.via_cluster:
        return None

    def take(sample: ev.LinkSample | ev.NodeNotAnswering) -> None:
        if isinstance(sample, ev.LinkSample):
            summary.add(sample.node, sample.mem_total, sample.mem_available, sample.interfaces)
        emit(sample)

    return asyncio.create_task(
        session.nodes.sample_link(target.cluster_id, take, interval=LINK_INTERVAL_S, stop=stop)
    )


async def _stop_sampling(
    task: asyncio.Task[None] | None,
    emit: Emit[ev.BenchEvent],
    result: BenchResult,
    summary: LinkSummary,
) -> None:
    """End the sampling (cancelled if still running); its summary goes into the result.
    A sampling that failed costs the benchmark its link figures, never its results."""
    if task is None:
        return
    task.cancel()
    (outcome,) = await asyncio.gather(task, return_exceptions=True)
    if isinstance(outcome, SparkError):
        emit(
            ev.Notice("warning", f"link and memory not sampled: {outcome.message}", outcome.remedy)
        )
    elif isinstance(outcome, Exception):
        emit(
            ev.Notice(
                "warning",
                f"link and memory not sampled: {outcome!r}",
                "the benchmark's own figures are complete; `spark-tui watch` samples the "
                "nodes' link and memory on its own",
            )
        )
    result.link = summary.links()
    result.memory = summary.memory()


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

"""Following a rank's container log, resilient to a dropped SSH connection.

When the stream breaks and the container still runs, the follower reconnects and asks
Docker for the log again from a moment before the last timestamp it saw; lines at that
boundary are deduplicated on (timestamp, text), counting repeats, so no line is lost and
none is shown twice. An outage of any length is waited out (capped backoff), emitted after
every failed attempt and once more, ended, when the node answers again: a node that cannot
be reached is a state, not the end of the log.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from spark_tui.core.errors import SparkError, UnreachableError
from spark_tui.ops.events import (
    Emit,
    LogEvent,
    NodeReachable,
    NodeUnreachable,
    RankLogEnded,
    RankLogRecord,
)
from spark_tui.remote.docker_remote import LogRecord, LogStream, RemoteDocker
from spark_tui.remote.hostkeys import HostKeyError
from spark_tui.remote.ssh import ConnectionPool, Outage

if TYPE_CHECKING:
    from spark_tui.ops.cluster import RankStatus

T = TypeVar("T")

# What following a container's log emits: its records, and the outages of its node (each
# failed attempt's snapshot; the same outage with `ended` set once the node is back).
FollowUpdate = LogRecord | Outage

# Lines this close to the newest one are remembered for deduplication (the resume asks
# Docker for the log from 1 ms before the newest line: this must be wider).
_WINDOW_NS = 2_000_000_000
_PRUNE_AT = 4096


class BoundaryDedupe:
    """Drops the lines a resumed stream repeats; counts repeats so identical lines survive."""

    def __init__(self) -> None:
        self.last_ns = 0
        self._seen: Counter[tuple[int, str]] = Counter()
        self._replay: Counter[tuple[int, str]] | None = None

    def resume(self) -> None:
        """A new stream starts before the newest line seen: its first lines may repeat."""
        self._replay = Counter()

    def accept(self, rec: LogRecord) -> bool:
        if rec.ts_ns == 0:
            return True  # no timestamp: nothing to compare with
        key = (rec.ts_ns, rec.text)
        if self._replay is not None:
            if rec.ts_ns <= self.last_ns:
                self._replay[key] += 1
                if self._replay[key] <= self._seen[key]:
                    return False
            else:
                self._replay = None  # past the boundary: everything now is new
        self._seen[key] += 1
        if rec.ts_ns > self.last_ns:
            self.last_ns = rec.ts_ns
        if len(self._seen) > _PRUNE_AT:
            floor = self.last_ns - _WINDOW_NS
            self._seen = Counter({k: v for k, v in self._seen.items() if k[0] >= floor})
        return True


class RankLogFollower:
    """Follows one container's log until the container ends; resumes across dropped links.

    `follow(emit)` emits LogRecords. `resumes` counts how often the stream was re-opened.
    It returns when the container has exited (after collecting its last lines) or is gone.
    While the node cannot be reached it keeps trying (cancel it to stop), emitting the
    outage after each failed attempt and once more, ended, when the node is back; only a
    changed host key (HostKeyError) or a Docker error ends it with an exception.
    """

    def __init__(
        self,
        docker: RemoteDocker,
        container: str,
        *,
        tail: int | str = "all",
        since_ns: int | None = None,
        resume_pause: float = 0.1,
        seen: Sequence[LogRecord] = (),
    ) -> None:
        self.docker = docker
        self.container = container
        self.tail = tail
        self.since_ns = since_ns
        self.resume_pause = resume_pause
        self.dedupe = BoundaryDedupe()
        self.resumes = 0
        self.outages = 0
        self._emit: Emit[FollowUpdate] = _nowhere
        self._stream: LogStream | None = None
        self._closed = False
        # Lines the caller already has (a backlog it fetched): continue right after them.
        for rec in seen:
            self.dedupe.accept(rec)
        if self.dedupe.last_ns:
            self.since_ns, self.tail = self.dedupe.last_ns, "all"
            self.dedupe.resume()

    async def _wait_out(self, exc: UnreachableError) -> None:
        """The node did not answer: wait until its connection and Docker are back."""
        outage = Outage(self.docker.node, reason=exc.message, remedy=exc.remedy)
        self.outages += 1

        def report(o: Outage) -> None:
            outage.attempts += 1
            outage.reason = o.reason or outage.reason
            outage.remedy = o.remedy or outage.remedy
            outage.retry_in = o.retry_in
            self._emit(replace(outage))  # a snapshot: the outage goes on changing

        self._emit(replace(outage))
        delay = self.resume_pause
        while not self._closed:
            try:
                await self.docker.reconnect_patiently(report)
                break
            except HostKeyError:
                raise
            except SparkError as again:
                if self.docker.conn.closed:
                    raise  # the pool was closed under us: nobody is waiting any more
                # The link is back but Docker did not answer through it yet: try again.
                report(
                    Outage(
                        self.docker.node, reason=again.message, remedy=again.remedy, retry_in=delay
                    )
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        outage.ended = time.monotonic()
        if not self._closed:
            self._emit(outage)

    async def _patiently(self, call: Callable[[], Awaitable[T]]) -> T:
        """A Docker call that waits out outages instead of failing on them."""
        while True:
            try:
                return await call()
            except HostKeyError:
                raise
            except UnreachableError as exc:
                await self._wait_out(exc)

    async def follow(self, emit: Emit[FollowUpdate]) -> None:
        """Follow the log until the container ends (see the class doc), each record and
        outage to `emit`."""
        self._emit = emit
        first = True
        while not self._closed:
            since = self.since_ns if first else (self.dedupe.last_ns or self.since_ns)
            tail = self.tail if first else "all"
            try:
                stream = await self.docker.stream_logs(self.container, tail=tail, since_ns=since)
            except HostKeyError:
                raise
            except UnreachableError as exc:
                await self._wait_out(exc)
                continue
            except SparkError:
                if first:
                    raise
                # The node is back but Docker hiccuped: try once more after a pause.
                await asyncio.sleep(self.resume_pause)
                await self._patiently(self.docker.reconnect)
                continue
            self._stream = stream
            try:
                async for rec in stream.records():
                    if self.dedupe.accept(rec):
                        emit(rec)
            finally:
                stream.close()
            if self._closed:
                return
            # The stream ended: the container stopped, or the connection dropped.
            info = await self._patiently(lambda: self.docker.inspect(self.container))
            first = False
            if info is None:
                return
            if (info.get("State") or {}).get("Running"):
                self.resumes += 1
                self.dedupe.resume()
                await asyncio.sleep(self.resume_pause)
                continue
            # Exited: a drop may have coincided with the exit, so fetch what is left.
            self.dedupe.resume()
            rest = await self._patiently(
                lambda: self.docker.logs(self.container, since_ns=self.dedupe.last_ns or None)
            )
            for rec in rest:
                if self.dedupe.accept(rec):
                    emit(rec)
            return

    def close(self) -> None:
        self._closed = True
        if self._stream is not None:
            self._stream.close()


async def rank_log(
    pool: ConnectionPool,
    rank: RankStatus,
    *,
    tail: int | None,
    follow: bool,
    emit: Emit[LogEvent],
) -> None:
    """One rank's log on the pool's (opened) nodes, `tail` lines back (None: all), each
    record to `emit`. With `follow` it goes on until the container ends (then RankLogEnded),
    waiting out outages of any length (NodeUnreachable after each failed attempt,
    NodeReachable once back)."""

    def update(item: FollowUpdate) -> None:
        if isinstance(item, LogRecord):
            emit(RankLogRecord(rank.rank, rank.node, item.text, item.ts_ns))
        elif item.ended is not None:
            emit(NodeReachable(item.node, (rank.rank,), item.seconds))
        else:
            emit(
                NodeUnreachable(
                    item.node,
                    (rank.rank,),
                    item.seconds,
                    item.attempts,
                    item.retry_in,
                    item.reason,
                    item.remedy,
                )
            )

    docker = await RemoteDocker.open(pool[rank.node])
    try:
        back = "all" if tail is None else tail
        if not follow:
            for rec in await docker.logs(rank.container, tail=back):
                update(rec)
            return
        await RankLogFollower(docker, rank.container, tail=back).follow(update)
        emit(RankLogEnded(rank.rank, rank.node, rank.container))
    finally:
        await docker.close()


def _nowhere(_item: FollowUpdate) -> None:
    """Where a follower's updates go before it follows (none are made then)."""

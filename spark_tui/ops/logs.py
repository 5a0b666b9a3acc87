"""Following a rank's container log, resilient to a dropped SSH connection.

When the stream breaks and the container still runs, the follower reconnects (the
node connection backs off on its own) and asks Docker for the log again from a moment
before the last timestamp it saw; lines at that boundary are deduplicated on
(timestamp, text), counting repeats, so no line is lost and none is shown twice.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence

from spark_tui.core.errors import SparkError
from spark_tui.remote.docker_remote import LogRecord, LogStream, RemoteDocker

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

    `records()` yields LogRecords. `resumes` counts how often the stream was re-opened.
    It ends when the container has exited (after collecting its last lines) or is gone;
    it raises UnreachableError when the node cannot be reached again.
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
        self._stream: LogStream | None = None
        self._closed = False
        # Lines the caller already has (a backlog it fetched): continue right after them.
        for rec in seen:
            self.dedupe.accept(rec)
        if self.dedupe.last_ns:
            self.since_ns, self.tail = self.dedupe.last_ns, "all"
            self.dedupe.resume()

    async def records(self) -> AsyncIterator[LogRecord]:
        first = True
        while not self._closed:
            since = self.since_ns if first else (self.dedupe.last_ns or self.since_ns)
            tail = self.tail if first else "all"
            try:
                stream = await self.docker.stream_logs(self.container, tail=tail, since_ns=since)
            except SparkError:
                if first:
                    raise
                # The node is back but Docker hiccuped: try once more after a pause.
                await asyncio.sleep(self.resume_pause)
                await self.docker.reconnect()
                continue
            self._stream = stream
            try:
                async for rec in stream.records():
                    if self.dedupe.accept(rec):
                        yield rec
            finally:
                stream.close()
            first = False
            if self._closed:
                return
            # The stream ended: the container stopped, or the connection dropped.
            info = await self.docker.inspect(self.container)
            if info is None:
                return
            if (info.get("State") or {}).get("Running"):
                self.resumes += 1
                self.dedupe.resume()
                await asyncio.sleep(self.resume_pause)
                continue
            # Exited: a drop may have coincided with the exit, so fetch what is left.
            self.dedupe.resume()
            for rec in await self.docker.logs(self.container, since_ns=self.dedupe.last_ns or None):
                if self.dedupe.accept(rec):
                    yield rec
            return

    def close(self) -> None:
        self._closed = True
        if self._stream is not None:
            self._stream.close()

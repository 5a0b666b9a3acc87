"""Events of the model and image syncs, shared by the CLI and the cockpit.

A sync yields `SyncStep`s (what it is doing, on which node), `SyncProgress` (bytes so far of
one transfer, with its rate and ETA), `SyncDone` per node and item, `Notice`s for warnings
and errors with their remedy, and one `SyncFinished` at the end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from spark_tui.ops.events import Notice


@dataclass(frozen=True)
class SyncStep:
    """A step taken: `action` is e.g. "check", "download", "copy", "pull", "load"."""

    node: str
    item: str  # a model id or an image reference
    action: str
    message: str


@dataclass(frozen=True)
class SyncProgress:
    """How far one transfer to `node` is: `total_bytes` None when not known."""

    node: str
    item: str
    action: str
    done_bytes: int
    total_bytes: int | None
    rate_bytes_per_s: float | None = None
    eta_seconds: float | None = None

    @property
    def fraction(self) -> float | None:
        if not self.total_bytes:
            return None
        return min(1.0, self.done_bytes / self.total_bytes)


@dataclass(frozen=True)
class SyncDone:
    """`item` is complete on `node`: `sent_bytes` went over the wire, `skipped` files were
    there already; `source` is where it came from ("" when nothing had to be sent)."""

    node: str
    item: str
    sent_bytes: int = 0
    skipped: int = 0
    source: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class SyncFinished:
    """The end of a sync: `ok` when every item is complete on every node."""

    ok: bool
    items: tuple[str, ...] = ()
    failed_nodes: tuple[str, ...] = ()


SyncEvent = SyncStep | SyncProgress | SyncDone | SyncFinished | Notice


@dataclass
class RateMeter:
    """Rate and ETA of one transfer from (time, bytes) samples, over the whole transfer."""

    total: int | None
    start_bytes: int = 0
    started: float = field(default_factory=time.monotonic)

    def progress(self, node: str, item: str, action: str, done: int) -> SyncProgress:
        elapsed = time.monotonic() - self.started
        sent = done - self.start_bytes
        rate = sent / elapsed if elapsed > 0 and sent > 0 else None
        eta = None
        if rate and self.total is not None:
            eta = max(0.0, (self.total - done) / rate)
        return SyncProgress(node, item, action, done, self.total, rate, eta)


async def drain(
    work: Coroutine[Any, Any, set[str]], queue: asyncio.Queue[SyncEvent]
) -> AsyncIterator[SyncEvent | set[str]]:
    """Run `work`, yielding what it puts on `queue` as it comes, then its result (the nodes
    that failed) last; a consumer that stops early cancels the work."""
    task = asyncio.create_task(work)
    try:
        while True:
            getter = asyncio.create_task(queue.get())
            done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield getter.result()
                continue
            getter.cancel()
            while not queue.empty():
                yield queue.get_nowait()
            yield task.result()
            return
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def relay(
    read: Callable[[], Awaitable[bytes]], sink: Any, report: Callable[[int], None]
) -> int:
    """Copy what `read` gives (until it gives b"") into the `sink` process's stdin, calling
    `report` with the bytes sent so far after each chunk; returns the bytes sent."""
    sent = 0
    while chunk := await read():
        sink.stdin.write(chunk)
        await sink.stdin.drain()
        sent += len(chunk)
        report(sent)
    return sent

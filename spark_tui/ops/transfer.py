"""What the model and image syncs share to move bytes: a transfer's rate and ETA, a relay
from one node's process to another's, and the drain that yields a sync's events while its
work runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from spark_tui.ops.events import SyncProgress, SyncUpdate


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
    work: Coroutine[Any, Any, set[str]], queue: asyncio.Queue[SyncUpdate]
) -> AsyncIterator[SyncUpdate | set[str]]:
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

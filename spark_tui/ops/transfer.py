"""What the model and image syncs share to move bytes: a transfer's rate and ETA, and a
relay from one node's process to another's."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from spark_tui.ops.events import Emit, SyncProgress


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


async def relay(read: Callable[[], Awaitable[bytes]], sink: Any, emit: Emit[int]) -> int:
    """Copy what `read` gives (until it gives b"") into the `sink` process's stdin, emitting
    the bytes sent so far after each chunk; returns the bytes sent."""
    sent = 0
    while chunk := await read():
        sink.stdin.write(chunk)
        await sink.stdin.drain()
        sent += len(chunk)
        emit(sent)
    return sent

"""Run work as a task and hand what it emits to the consumer as one async generator: the
shape of a launch, an attach and every service action."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def stream_events(
    work: Callable[[Callable[[T], None]], Coroutine[Any, Any, None]],
) -> AsyncGenerator[T, None]:
    """What `work(emit)` emits, in order, until it returns; its error is raised once every
    event before it has been yielded. Closing the generator (or cancelling its consumer)
    cancels the work and waits for it to end."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    done = object()
    task: asyncio.Task[None] = asyncio.create_task(work(queue.put_nowait))
    task.add_done_callback(lambda _t: queue.put_nowait(done))
    try:
        while True:
            item = await queue.get()
            if item is done:
                break
            yield item
        task.result()  # re-raises the work's error
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

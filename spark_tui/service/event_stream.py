"""Run work as a task and hand what it emits to the consumer as one async generator: how the
service turns an operation's (or an action's) `emit` into the stream it consumes or serves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from spark_tui.ops.events import Emit

T = TypeVar("T")


async def stream_events(
    work: Callable[[Emit[T]], Coroutine[Any, Any, object]],
) -> AsyncGenerator[T, None]:
    """What `work(emit)` emits, in order, until it returns; its error is raised once every
    event before it has been yielded. Closing the generator (or cancelling its consumer)
    cancels the work and waits for it to end."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    done = object()
    task: asyncio.Task[object] = asyncio.create_task(work(queue.put_nowait))
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


def streamed(
    op: Callable[..., Coroutine[Any, Any, object]], /, *args: Any, **kwargs: Any
) -> AsyncGenerator[Any, None]:
    """What `op(*args, **kwargs, emit=...)` emits, streamed as `stream_events` streams it:
    how a script or a test reads one operation's events one by one."""
    return stream_events(lambda emit: op(*args, **kwargs, emit=emit))

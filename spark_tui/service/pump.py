"""Run an action's work as a task and hand its events, questions included, to the consumer
as one async generator (the shape every service action has)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from spark_tui.service.events import Question

Emit = Callable[[Any], None]
Ask = Callable[[Question], Awaitable[bool]]
Work = Callable[[Emit, Ask], Awaitable[None]]


async def pump(work: Work) -> AsyncIterator[Any]:
    """Events `work` emits, in order; a question it asks is yielded, and its answer (the
    consumer's `reply()`, else the question's default) goes back when the consumer asks for
    the next event. Closing the generator cancels the work."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    done = object()
    loop = asyncio.get_running_loop()

    async def ask(question: Question) -> bool:
        future: asyncio.Future[bool] = loop.create_future()
        queue.put_nowait((question, future))
        return await future

    task = asyncio.create_task(work(queue.put_nowait, ask))
    task.add_done_callback(lambda _t: queue.put_nowait(done))
    try:
        while True:
            item = await queue.get()
            if item is done:
                break
            if isinstance(item, tuple):
                question, future = item
                yield question
                if not future.done():
                    future.set_result(question.yes)
                continue
            yield item
        task.result()  # re-raises the work's error
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(task, return_exceptions=True)

"""Run an action's work as a task and hand its events, questions included, to the consumer
as one async generator (the shape every service action has)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from spark_tui.service.event_stream import stream_events

if TYPE_CHECKING:
    # The operations' `Emit` is the actions' too: one way to hand over events, at every
    # layer (a name for the type checker: the event types load when first used).
    from spark_tui.ops.events import Emit as Emit
    from spark_tui.service.events import Question

E = TypeVar("E")
# How it asks the user (the consumer answers; see `Question`).
Ask = Callable[["Question"], Awaitable[bool]]


@dataclass(frozen=True)
class _Asked:
    """A question on its way to the consumer, with the future its answer goes to."""

    question: Question
    answer: asyncio.Future[bool]


async def pump(work: Callable[[Emit[E], Ask], Awaitable[None]]) -> AsyncIterator[E | Question]:
    """Events `work` emits, in order; a question it asks is yielded, and its answer (the
    consumer's `reply()`, else the question's default) goes back when the consumer asks for
    the next event. Closing the generator cancels the work."""
    loop = asyncio.get_running_loop()

    async def run(emit: Emit[E | _Asked]) -> None:
        async def ask(question: Question) -> bool:
            answer: asyncio.Future[bool] = loop.create_future()
            emit(_Asked(question, answer))
            return await answer

        await work(emit, ask)

    async with contextlib.aclosing(stream_events(run)) as events:
        async for item in events:
            if isinstance(item, _Asked):
                yield item.question
                if not item.answer.done():
                    item.answer.set_result(item.question.yes)
                continue
            yield item

"""Workers that belong to the App, not to the screen or the flow that starts them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any

from textual.worker import Worker


def app_work(
    *, group: str
) -> Callable[[Callable[..., Coroutine[Any, Any, None]]], Callable[..., Worker[None]]]:
    """Like `@work(exclusive=True, exit_on_error=False)`, but the worker belongs to the App:
    the quit flow cancels the screen's launch and measurements by group, and a worker's
    error is shown by the App's handler. The decorated function's first argument is the
    screen it works for (a method's `self`, or a flow's `screen`)."""

    def decorate(
        method: Callable[..., Coroutine[Any, Any, None]],
    ) -> Callable[..., Worker[None]]:
        @functools.wraps(method)
        def run(screen: Any, *args: Any, **kwargs: Any) -> Worker[None]:
            # The function itself, not its coroutine: a worker the app never starts (it is
            # closing, or a newer one of the group replaced it first) then leaves no
            # coroutine behind that was never awaited.
            worker: Worker[None] = screen.app.run_worker(
                functools.partial(method, screen, *args, **kwargs),
                name=method.__name__,
                group=group,
                exclusive=True,
                exit_on_error=False,
            )
            return worker

        return run

    return decorate

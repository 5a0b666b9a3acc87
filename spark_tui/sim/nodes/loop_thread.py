"""An event loop of its own, in a thread, for simulated nodes that live in the cockpit's process.

Why the demo's nodes do not share the cockpit's loop: Textual's `App.run_async` installs
`asyncio.eager_task_factory` (Python 3.12+), so a task starts running inside `create_task`.
asyncssh's server authentication does not survive that: `ServerAuth.__init__` starts its
`_start` coroutine as a task, and `ServerAuth.send_packet` only sends while the connection's
`auth` is that handler, which is assigned only after the constructor returns. Run eagerly,
the handler's PK_OK / success reply is dropped and the client waits until its login
timeout. On a loop of their own (default, lazy tasks), the nodes behave like `spark-tui sim`
in its own process, and like real machines: the cockpit's load cannot stall them either.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# How long the tasks still on the loop when it stops get to finish once cancelled.
END_TASKS_S = 5.0


class LoopThread:
    """A daemon thread running a fresh asyncio loop; `run` awaits a coroutine on it."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                self.loop.run_until_complete(self._end_tasks())
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()

    async def _end_tasks(self) -> None:
        """Cancel the tasks still on the loop (an SSH session's handler, a forwarder) and let
        them finish, as asyncio.run does before closing its loop: a task left pending would
        be destroyed by the garbage collector once the loop is closed, and its cleanup fail
        with "Event loop is closed"."""
        me = asyncio.current_task()
        deadline = self.loop.time() + END_TASKS_S
        # Again while cancelling one starts another (a connection's close, its cleanup).
        while tasks := [t for t in asyncio.all_tasks() if t is not me and not t.done()]:
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                return
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=remaining)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this thread's loop and wait for it from the caller's loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def stop(self) -> None:
        """Stop the loop (after its pending callbacks; the tasks still on it cancelled and
        let finish) and wait for the thread to end."""
        if not self._thread.is_alive():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.to_thread(self._thread.join)

"""Run the cockpit so that its backend is always closed, however the app ends."""

from __future__ import annotations

import asyncio
import contextlib

from spark_tui.core.errors import EXIT_OK
from spark_tui.ui.app import SparkApp

# How long closing the backend may take after the app ended (stopping simulated Sparks).
CLOSE_TIMEOUT = 30.0


def run_cockpit(app: SparkApp) -> int:
    """Run the app in a fresh event loop; then close its backend in the same loop (the
    demo's simulated Sparks and their engine processes live in it), even after a crash."""

    async def main() -> int:
        try:
            result = await app.run_async()
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(app.backend.close(), CLOSE_TIMEOUT)
        return int(result or EXIT_OK)

    return asyncio.run(main())

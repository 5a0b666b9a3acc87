"""Run the cockpit so that its session is always closed, however the app ends."""

from __future__ import annotations

import asyncio
import sys

from spark_tui.core.errors import EXIT_OK
from spark_tui.ui.app import SparkApp

# How long closing the session may take after the app ended (stopping simulated Sparks).
CLOSE_TIMEOUT = 30.0


def run_cockpit(app: SparkApp, *, headless: bool = False) -> int:
    """Run the app in a fresh event loop; then close its session in the same loop (the
    demo's simulated Sparks and their engine processes live in it), even after a crash.
    `headless` runs it without a terminal (tests, scripts)."""
    session = app.session

    async def main() -> int:
        try:
            result = await app.run_async(headless=headless)
        finally:
            try:
                await asyncio.wait_for(session.close(), CLOSE_TIMEOUT)
            except Exception as exc:  # the app's own outcome goes on
                # The screen is restored by now: this is the only place left to say it.
                print(
                    f"spark-tui: closing the session failed: {exc or type(exc).__name__}\n"
                    "  remedy: check for what was left running with `spark-tui status` "
                    "(a demo's simulated Sparks end with this process)",
                    file=sys.stderr,
                )
        # A crash ends the app with return code 1 and no result: not a success.
        return app.return_code or int(result or EXIT_OK)

    return asyncio.run(main())

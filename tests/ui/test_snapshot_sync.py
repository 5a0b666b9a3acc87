"""SVG snapshot of the cockpit's sync view mid-copy: the real app and its sync action, the
session's sync seams replaying a scripted model copy (TEST DOUBLE, see cockpit_replay) that
stops at 40 % of the worker's copy, so no clock reaches the picture.

Update with `pytest tests/ui/test_snapshot_sync.py --snapshot-update` and look at it first.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cockpit_helpers import settle, wait_until
from cockpit_replay import ReplayNodes, ReplaySession
from textual.pilot import Pilot

from spark_tui.ops.events import Emit, Notice
from spark_tui.service.events import SyncProgress, SyncStep, SyncUpdate
from spark_tui.ui.app import SparkApp
from spark_tui.ui.widgets.sync import SyncScreen

MODEL = "nvidia/GLM-5.3-Flash-FP4-Local"
HEAD, WORKER = "sim-spark-1", "sim-spark-2"


class SyncReplay(ReplayNodes):
    """The replay session whose model sync copies to the worker and stays at 40 %."""

    async def model_sync(
        self, facts: Any, recipe_name: str, needs: Any, where: str, *, emit: Emit[SyncUpdate]
    ) -> bool:
        emit(
            SyncStep(
                HEAD, MODEL, "check", f"{HEAD} has {MODEL} at 3f1c0de2a9b4 complete: the source"
            )
        )
        emit(
            Notice(
                "warning",
                f"{HEAD} cannot SSH to {WORKER} (nvidia@10.0.0.2): relaying the copy through "
                "this machine (slower)",
                f"let {HEAD} SSH to nvidia@10.0.0.2 without a password",
            )
        )
        emit(
            SyncStep(
                WORKER,
                MODEL,
                "copy",
                f"{HEAD} -> {WORKER} through this machine: 3 file(s), 14.10 GB (4 complete, "
                "skipped; 1 resumed)",
            )
        )
        emit(SyncProgress(WORKER, MODEL, "copy", 5_640_000_000, 14_100_000_000, 212e6, 39.9))
        await asyncio.Event().wait()  # frozen mid-copy until the app ends
        raise AssertionError("the sync was frozen until the app ended")


async def mid_copy(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await wait_until(pilot, app.discovered.is_set, 10, "discovery")
    await pilot.press("m")
    await wait_until(pilot, lambda: isinstance(app.screen, SyncScreen), 5, "the sync view")
    syncer = app.main.syncer

    def copying() -> bool:
        return syncer.tally is not None and syncer.tally.row(WORKER, MODEL).done_bytes > 0

    await wait_until(pilot, copying, 5, "the copy's progress")
    app.screen.redraw()  # type: ignore[attr-defined]
    await settle(pilot)


def test_sync_view_mid_copy(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = SparkApp(
        ReplaySession(SyncReplay()),
        recipe="glm-5.3-flash",
        auto_refresh=False,
        handle_signals=False,
    )
    assert snap_compare(app, terminal_size=(120, 36), run_before=mid_copy)

"""Stopping the cluster: the confirmation, then every rank stopped and removed and the nodes
probed again (the verdicts then count the memory it freed)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from rich.text import Text

from spark_tui.core.errors import SparkError
from spark_tui.ui.screens.dialogs import Dialog
from spark_tui.ui.widgets.recipes import RecipePanel
from spark_tui.ui.workers import app_work

if TYPE_CHECKING:
    from spark_tui.ui.screens.main import MainScreen


def ask_stop(screen: MainScreen) -> None:
    """Ask before stopping the cluster of ours that runs."""
    cluster = screen.cluster
    if cluster is None or not cluster.running:
        screen.notify("nothing to stop: no cluster of ours is running", severity="information")
        return
    body = Text(f"Stop cluster {cluster.cluster_id} ({cluster.recipe})?\n")
    body.append("Every rank's container on every node is stopped and removed.")

    def answer(yes: bool | None) -> None:
        if yes:
            stop(screen)

    screen.app.push_screen(Dialog("Stop the cluster", body, yes="Stop"), answer)


@app_work(group="stop")
async def stop(screen: MainScreen) -> None:
    if await stop_now(screen) and screen.session.clusters_seen():
        # Another service of ours runs on beside it: follow that one now.
        await screen.attach_running()


async def stop_now(screen: MainScreen) -> bool:
    """Stop the cluster now (whatever follows or measures it ends first); False if the
    stop failed (the error is shown)."""
    cluster = screen.cluster
    if cluster is None:
        return True
    # The stop below removes the ranks: the launch it interrupts must not as well.
    screen.session.keep_on_cancel = True
    for group in ("watch", "follow", "measure"):
        screen.workers.cancel_group(screen.app, group)
    screen.show_status(f"stopping {cluster.cluster_id}…")
    try:
        await screen.consume(screen.session.stop(cluster.cluster_id))
    except SparkError as exc:
        screen.show_error(exc.message, exc.remedy)
        return False
    finally:
        screen.session.keep_on_cancel = False
    screen.ray_clear()
    if screen.session.chosen == cluster.cluster_id:
        screen.session.chosen = None
    screen.show_status(f"cluster {cluster.cluster_id} stopped: no container left on any node")
    # The last probe still sees the stopped cluster's memory in use (and no cluster
    # left to credit it to): the verdicts follow the nodes as they are now.
    with contextlib.suppress(SparkError):
        await screen.consume(screen.session.probe())
    screen.refresh_recipes(keep=screen.query_one(RecipePanel).selected_name)
    screen.refresh_title()
    return True

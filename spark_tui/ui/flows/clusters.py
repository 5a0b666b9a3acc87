"""Choosing among our clusters side by side: the next one followed (its log panes, gauges
and API), the keys acting on it from then on; the one left runs on as it was."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui.ui.workers import app_work

if TYPE_CHECKING:
    from spark_tui.ui.screens.main import MainScreen


def next_cluster(screen: MainScreen) -> None:
    """Follow the cluster after the one followed now (by id, round)."""
    seen = screen.session.clusters_seen()
    if len(seen) < 2:
        screen.notify("no other cluster of ours runs on these nodes", severity="information")
        return
    if screen.busy:
        # A launch still loading would be removed by leaving it; a measurement would end.
        screen.notify(f"busy: {screen.busy} (switch when it has ended)", severity="warning")
        return
    ids = [c.cluster_id for c in seen]
    cluster = screen.cluster
    current = cluster.cluster_id if cluster is not None else screen.session.chosen
    switch(screen, ids[(ids.index(current) + 1) % len(ids)] if current in ids else ids[0])


@app_work(group="switch")
async def switch(screen: MainScreen, cluster_id: str) -> None:
    """Follow `cluster_id` instead: ending the follow of the other stops nothing of it."""
    for group in ("watch", "follow", "measure"):
        screen.workers.cancel_group(screen.app, group)
    screen.ray_clear()
    screen.session.cluster = None
    screen.session.chosen = cluster_id
    screen.refresh_title()
    screen.show_status(f"switching to cluster {cluster_id}…")
    await screen.attach_running()

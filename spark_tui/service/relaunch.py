"""Our cluster relaunched with given settings, up to ready: how a sweep starts each value,
how it leaves a value running, and how a failed tune brings back the settings it replaced.
A launch that replaces a cluster of ours evaluates before it stops anything (see
`service.launch`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import SparkError
from spark_tui.service.launch import LaunchOptions, launched_until_ready
from spark_tui.service.stop import stop_all

if TYPE_CHECKING:
    from spark_tui.core.recipe import Recipe
    from spark_tui.service import events as ev
    from spark_tui.service.cluster import Cluster
    from spark_tui.service.pump import Ask, Emit
    from spark_tui.service.session import Session


async def relaunched(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    ask: Ask,
    recipe: Recipe,
    overrides: dict[str, Any],
    *,
    insist: bool | None = False,
) -> Cluster:
    """Launch with `overrides`, replacing our cluster on those nodes (stopped after the
    launch's checks, never before), and return the new cluster once it is ready (the
    launch's error when it fails first). `insist` False: a
    launch the fit check refuses is an error, not a question (an unattended sweep is not
    held by one); None: asked, as a launch asks."""
    options = LaunchOptions(follow=False, replace=True, insist=insist)
    async with launched_until_ready(
        session, emit, ask, recipe, overrides, options, "the relaunch"
    ) as (cluster, _launching):
        return cluster


async def relaunch_settings(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    ask: Ask,
    recipe: Recipe,
    overrides: dict[str, Any],
    *,
    insist: bool | None = False,
) -> Cluster:
    """Our cluster stopped (also one that failed or was cut short: its ranks go, and the
    nodes are probed afresh, before the settings are judged on their memory), then
    relaunched with `overrides` up to ready."""
    running = session.cluster
    if running is not None:
        await stop_all(session, emit, running.cluster_id)
    return await relaunched(session, emit, ask, recipe, overrides, insist=insist)


def runs_settings(session: Session, recipe: Recipe, overrides: dict[str, Any]) -> bool:
    """Whether our ready cluster already runs exactly these settings."""
    from spark_tui.core.overrides import apply_overrides

    cluster = session.cluster
    if cluster is None or not cluster.ready or cluster.recipe != recipe.name:
        return False
    try:
        return apply_overrides(recipe, dict(cluster.overrides)) == apply_overrides(
            recipe, overrides
        )
    except SparkError:
        return False

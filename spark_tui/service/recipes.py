"""The recipes a user has: the git registries the config names, cloned or brought up to
date (see ops.registries), before the recipes are listed."""

from __future__ import annotations

from spark_tui.core import registry
from spark_tui.core.errors import InputError
from spark_tui.ops.registries import SyncResult


def sync_registries(*, update: bool = False) -> list[SyncResult]:
    """Clone every configured registry that is missing; with `update`, fetch the others
    too. A registry that fails says why in its result; a broken config syncs nothing (the
    listing reports it with its remedy)."""
    from spark_tui.ops.registries import sync

    try:
        configured = registry.configured_registries()
    except InputError:
        return []
    return sync(configured, update_existing=update)

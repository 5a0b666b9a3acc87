"""`spark-tui images sync RECIPE (--inventory FILE | --hosts ...) [--json]`: the head's copy of
the recipe's container image on every node, with the same image ID.

A node without it (or with another build) pulls it where a registry gives the same image,
otherwise gets it from a node that has it (`docker save | docker load`, node to node over
SSH, with progress). Each node's line says what was done there. This command only renders
the service's sync (`Session.sync_image`); the cockpit's sync key shows the same events.
Exit codes: 0 every node has the image; 1 a pull or copy failed; 2 bad input; 3 a node
could not be reached.
"""

from __future__ import annotations

import argparse

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK


async def _sync(args: argparse.Namespace) -> bool:
    from spark_tui.commands.models import show_sync
    from spark_tui.commands.terminal import session
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.service.sync import image_of

    recipe = find_recipe(args.recipe)
    image_of(recipe)  # no image: bad input, before any node is reached
    s = session(args)
    try:
        return await show_sync(s.sync_image(recipe), bool(args.json))
    finally:
        await s.close()


def run(args: argparse.Namespace) -> int:
    if args.images_command == "sync":
        from spark_tui.commands.interrupts import run_command

        return EXIT_OK if run_command(lambda: _sync(args)) else EXIT_FAILED
    raise AssertionError(args.images_command)  # argparse allows no other action

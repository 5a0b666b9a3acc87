"""The image's own flag check of a launch plan, as the interfaces reach it.

Every rank's `vllm serve` argv (and the one a Ray head execs) is checked against the flag
table of the head's image (see ops.image_flags): `check` over its own short-lived
connection, the session over its pool. A flag the image refuses blocks a launch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_tui.core.errors import OperationFailed
from spark_tui.core.fit import Finding
from spark_tui.core.inventory import InventoryNode
from spark_tui.core.plan import LaunchPlan

# The finding a flag check makes when the image is not on the head yet (a launch pulls it).
NOT_PULLED = "image_not_pulled"
# ... and when its table is still being read from the image (a first launch does not wait).
PENDING = "flags_pending"


def serve_argvs(plan: LaunchPlan) -> list[list[str]]:
    """The `vllm serve` argvs the plan runs, each once."""
    from spark_tui.ops.image_flags import serve_argvs as argvs

    return argvs(plan)


def plan_flags_now(
    inventory: Sequence[InventoryNode], plan: LaunchPlan, **pool_options: Any
) -> list[Finding]:
    """The flag check of the plan's serve argvs against the head's image, for the headless
    CLI: its own connection to the head, closed before it returns."""
    from spark_tui.ops.image_flags import check_image_flags_sync

    argvs = serve_argvs(plan)
    if not argvs:
        return []
    head = plan.head
    image = head.container.image
    return check_image_flags_sync(inventory, head.node, image, argvs, head.mods, **pool_options)


def refusal(findings: Sequence[Finding], recipe: str, image: str) -> OperationFailed | None:
    """The launch refusal the blocking flag findings make (None when there is none)."""
    from spark_tui.ops.image_flags import refusal as refused

    return refused(findings, recipe, image)

"""The service's API endpoint as the user reaches it: the URL on the head and an SSH tunnel
command built from the inventory (port, user, identity file, known_hosts)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_tui.core.inventory import InventoryNode


def tunnel_command(node: InventoryNode, api_port: int, local_port: int | None = None) -> str:
    """`ssh -N -L ...` that forwards `local_port` (default: the same) to the head's API."""
    local = local_port or api_port
    words = ["ssh", "-N", "-L", f"{local}:127.0.0.1:{api_port}"]
    if node.port:
        words += ["-p", str(node.port)]
    if node.identity_file:
        words += ["-i", node.identity_file]
    if node.known_hosts:
        words += ["-o", f"UserKnownHostsFile={node.known_hosts}"]
    words.append(f"{node.user}@{node.host}" if node.user else node.host)
    return " ".join(shlex.quote(w) for w in words)


def head_node(inventory: Sequence[InventoryNode], name: str) -> InventoryNode | None:
    """The inventory entry of the node called `name`."""
    return next((n for n in inventory if n.name == name), None)

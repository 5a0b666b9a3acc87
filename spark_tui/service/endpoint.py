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


def tunnel_port(names: Sequence[str], head: str, api_port: int) -> int:
    """The local port of a cluster's tunnel: its head's API port plus the head's place
    among the nodes given (`names`, in the user's order). Clusters side by side have
    different heads, so their tunnels can be open at once, and a launch (which sees only
    its own nodes), `status` and the cockpit give a cluster the same port whichever other
    clusters they see."""
    return api_port + (list(names).index(head) if head in names else 0)

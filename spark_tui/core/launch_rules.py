"""Rules about launching that the CLI and the cockpit share: what to do when a rank fails
for a reason the plan can explain."""

from __future__ import annotations

import re
from collections.abc import Sequence

from spark_tui.core.plan import MASTER_ADDR, MASTER_PORT, RankSpec, flag_value

# torch's TCPStore client ("The client socket has timed out after 600000ms while trying to
# connect to (10.0.0.1, 29501).") and the rendezvous wrappers around it.
_RENDEZVOUS_TIMEOUT = re.compile(
    r"client socket has timed out after .*trying to connect to|"
    r"DistNetworkError|TCPStore.*(?:timed out|[Tt]imeout)|"
    r"[Tt]imed out .*(?:rendezvous|store)|rendezvous.*timed out",
)


def rendezvous_timeout(lines: Sequence[str]) -> bool:
    """Whether a rank's lines say it could not reach the rendezvous (the head's store)."""
    return any(_RENDEZVOUS_TIMEOUT.search(line) for line in lines)


def rank_failure_remedy(
    lines: Sequence[str], ranks: Sequence[RankSpec], *, never_met: bool = False
) -> str | None:
    """A remedy that names this cluster's port, addresses and firewall for failures the
    plan explains (a rendezvous that could not be reached, or `never_met`: workers that
    never got past it before the ready timeout); None for the others."""
    if not ranks or not (never_met or rendezvous_timeout(lines)):
        return None
    head = ranks[0]
    if head.role == "ray-head":
        addr, port = head.cluster_address, flag_value(head.argv, "--port") or "6379"
    else:
        addr = flag_value(head.argv, MASTER_ADDR) or head.env.get("HEAD_IP") or head.cluster_address
        port = flag_value(head.argv, MASTER_PORT) or head.env.get("MASTER_PORT") or "29501"
    others = ", ".join(f"{r.node} ({r.cluster_address})" for r in ranks[1:]) or "the workers"
    return (
        f"the ranks could not meet at the rendezvous {addr}:{port} on {head.node}: check that "
        f"{others} reach {addr} over the ConnectX link (ping {addr} from each), that no "
        f"firewall blocks TCP port {port} on {head.node} (e.g. `sudo ufw allow {port}/tcp`), "
        "and that every rank was started (a worker that never came leaves the head waiting)"
    )

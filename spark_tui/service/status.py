"""The status action: our clusters on the nodes (from their containers' labels), each with
its API endpoint, the tunnel command that reaches it, whether a running one is loading (how
far) or ready, and, when it is down, why (which rank failed first, its lines, the head's,
and the command that removes what is left)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_tui.ops.diagnose import cluster_cleanup
from spark_tui.service.cluster import api_port
from spark_tui.service.endpoint import tunnel_port

if TYPE_CHECKING:
    from spark_tui.ops.cluster import ClusterStatus
    from spark_tui.ops.diagnose import ClusterDiagnosis
    from spark_tui.service.events import Endpoint
    from spark_tui.service.session import Session


@dataclass(frozen=True)
class ClusterReport:
    """One cluster of ours as `status` reports it."""

    cluster: ClusterStatus
    endpoint: Endpoint
    diagnosis: ClusterDiagnosis

    @property
    def failed(self) -> bool:
        return self.diagnosis.state == "failed"

    @property
    def state(self) -> str:
        """failed, loading, ready, degraded or stopped (a running cluster says which of
        loading or ready it is, when its diagnosis could tell)."""
        if self.failed:
            return "failed"
        readiness = self.diagnosis.readiness
        return readiness.state if readiness is not None else self.cluster.state


async def status(session: Session, cleanup: str | None = None) -> list[ClusterReport]:
    """The status action (see module doc); every node must answer. `cleanup` is the command
    a failed cluster's diagnosis names."""
    await session.connect(strict=True)
    out = []
    taken: set[int] = set()
    for c in await session.nodes.status():
        head = c.ranks[0] if c.ranks else None
        if head is None:
            continue
        port = api_port(list(head.command))
        # Each cluster's tunnel its own local port, so both tunnels can be open at once
        # (clusters on disjoint nodes may well serve on the same port of their heads).
        local = tunnel_port(session.node_names(), head.node, port)
        while local in taken:
            local += 1
        taken.add(local)
        endpoint = session.endpoint(c.cluster_id, head.node, port, local)
        # With clusters side by side, a bare `stop` would ask which: the clean-up names it.
        remove = cluster_cleanup(cleanup, c.cluster_id)
        out.append(ClusterReport(c, endpoint, await session.nodes.diagnose(c, remove)))
    return out

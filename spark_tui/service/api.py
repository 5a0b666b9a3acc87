"""The API an action measures: the one the user named, our cluster's, or the running
cluster's found on the nodes through a forward."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_tui.service.cluster import serve_flag

if TYPE_CHECKING:
    from spark_tui.ops.history import Run
    from spark_tui.service.session import Session


@dataclass
class ApiTarget:
    """An API to measure, and what the serve command says about it."""

    base_url: str
    via_cluster: bool = False
    model: str | None = None
    expect_reasoning: bool | None = None
    tool_call_parser: str | None = None
    launch: Run | None = None
    cluster_id: str | None = None  # the cluster of ours serving it (None: another server)
    # Where the forward ends on the head (node, host, port as the head sees them): a
    # benchmark opens its own channels there instead of going through the forward's port.
    head_api: tuple[str, str, int] | None = None


def target_from_argv(base_url: str, argv: Sequence[str], **kw: Any) -> ApiTarget:
    """What a head rank's `vllm serve` argv says about the service (model, parsers)."""
    argv = [str(a) for a in argv]
    t = ApiTarget(base_url, **kw)
    if len(argv) > 2 and argv[1] == "serve":
        t.model = serve_flag(argv, "--served-model-name") or argv[2]
        t.expect_reasoning = serve_flag(argv, "--reasoning-parser") is not None
        t.tool_call_parser = serve_flag(argv, "--tool-call-parser")
    return t


async def find_target(session: Session, base_url: str | None, model: str | None) -> ApiTarget:
    """The API to measure: the one given, the chosen cluster's (`session.chosen`), our
    cluster's, or the only running cluster's found on the nodes through a forward (valid
    while the session is open)."""
    if base_url:
        return ApiTarget(base_url, model=model)
    cluster = session.cluster
    chosen = session.chosen
    if (
        cluster is not None
        and cluster.ready
        and cluster.base_url
        and chosen in (None, cluster.cluster_id)
    ):
        t = target_from_argv(cluster.base_url, cluster.head_argv, via_cluster=True)
        t.launch = cluster.launch_run
        t.cluster_id = cluster.cluster_id
        head_node = next((node for rank, node in cluster.ranks if rank == 0), None)
        t.head_api = (head_node, "127.0.0.1", cluster.api_port) if head_node else None
    else:
        await session.connect(strict=True)
        found = await session.nodes.find_api(chosen)
        if any(r.get("state") not in (None, "running") for r in found.ranks):
            # A rank has exited (the head may answer for a while yet, 503): what is measured
            # would be a failed cluster; `status` says which rank and why.
            from spark_tui.core.errors import NoClusterError

            raise NoClusterError(session.where, [found.cluster_id])
        head = found.ranks[0] if found.ranks else {}
        t = target_from_argv(found.base_url, head.get("argv") or [], via_cluster=True)
        t.launch = session.history.launch_of(found.cluster_id, found.recipe)
        t.cluster_id = found.cluster_id
        if found.head_node and found.api_port:
            t.head_api = (found.head_node, found.api_host, found.api_port)
    t.model = model or t.model
    return t

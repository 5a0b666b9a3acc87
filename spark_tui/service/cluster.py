"""The cluster a session launched or attached to: its ranks, its head's serve command and
what is known about its API."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_tui.core.ports import DEFAULT_API_PORT

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.plan import LaunchPlan
    from spark_tui.ops.history import Run
    from spark_tui.service.events import Endpoint


def serve_flag(argv: Sequence[str], flag: str) -> str | None:
    """The value of `flag` in a serve command (`--flag value` or `--flag=value`)."""
    for i, tok in enumerate(argv):
        if tok == flag and i + 1 < len(argv):
            return str(argv[i + 1])
        if tok.startswith(flag + "="):
            return tok.split("=", 1)[1]
    return None


def api_port(argv: Sequence[str]) -> int:
    """The port the head's `vllm serve` listens on."""
    value = serve_flag(argv, "--port")
    return int(value) if value and value.isdigit() else DEFAULT_API_PORT


@dataclass
class Cluster:
    """The cluster this session launched or attached to, and what is known about its API."""

    cluster_id: str
    recipe: str
    overrides: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)  # the recipe's own settings
    ranks: list[tuple[int, str]] = field(default_factory=list)  # (rank, node)
    head_argv: list[str] = field(default_factory=list)
    plan: LaunchPlan | None = None
    base_url: str | None = None  # our forward's local end, once ready
    endpoint: Endpoint | None = None
    launch_run: Run | None = None
    ready: bool = False
    failed: bool = False
    # No longer watched (a node stopped answering and the user gave up waiting, or a rank
    # failed and the others were kept for inspection) but its ranks were left as they
    # were: they may well run on.
    unwatched: bool = False
    # A launch or attach of this session follows its ranks: that follow settles a failure
    # (stops the other ranks or keeps them), not a watch beside it.
    followed: bool = False

    @property
    def running(self) -> bool:
        """Containers of this cluster may be running (a failed launch removed them)."""
        return not self.failed or self.unwatched

    @property
    def model(self) -> str | None:
        argv = self.head_argv
        if len(argv) > 2 and argv[1] == "serve":
            return serve_flag(argv, "--served-model-name") or argv[2]
        return None

    @property
    def utilization(self) -> float:
        # The evaluation loads the fit model: not for the cockpit's first frame.
        from spark_tui.service.evaluate import gpu_memory_utilization

        return gpu_memory_utilization(self.head_argv)

    @property
    def api_port(self) -> int:
        return api_port(self.head_argv)


@dataclass(frozen=True)
class SeenCluster:
    """A running cluster of ours as the last probe saw it: id, recipe, nodes (head first)."""

    cluster_id: str
    recipe: str | None
    nodes: tuple[str, ...]


def clusters_seen(nodes: Sequence[NodeFacts], ours: Cluster | None = None) -> list[SeenCluster]:
    """Our running clusters on `nodes` (from the containers their probe saw), with `ours`
    (launched or attached to since) when it runs, by id: the services side by side."""
    if ours is None and not any(n.containers for n in nodes):
        return []  # the cockpit's first frame: nothing probed yet
    # The plan's labels, loaded when a probe came in (not for the first frame).
    from spark_tui.core.plan import LABEL_PREFIX

    cluster, rank, recipe = (LABEL_PREFIX + k for k in ("cluster", "rank", "recipe"))
    found: dict[str, tuple[str | None, dict[int, str]]] = {}
    for node in nodes:
        for c in node.containers:
            cid = c.labels.get(cluster)
            if c.state != "running" or not cid or not c.labels.get(rank, "").isdigit():
                continue
            ranks = found.setdefault(cid, (c.labels.get(recipe), {}))[1]
            ranks[int(c.labels[rank])] = node.name
    if ours is not None and ours.running and ours.ranks:
        found[ours.cluster_id] = (ours.recipe, dict(ours.ranks))
    return [
        SeenCluster(cid, recipe_name, tuple(n for _r, n in sorted(ranks.items())))
        for cid, (recipe_name, ranks) in sorted(found.items())
    ]

"""TEST DOUBLE: `Nodes` whose launches run the SIMULATED engine as local subprocesses (one
per rank of the plan the session built, on loopback), and the product's Session over them.
Evaluating, questions, records, smoke checks and benchmarks over HTTP, tuning and comparing
all run as in the product."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

from ops_helpers import two_nodes
from ops_simengine import SimService, loopback_ranks

from spark_tui.core.facts import NodeFacts
from spark_tui.core.fit import Finding
from spark_tui.core.inventory import InventoryNode
from spark_tui.core.plan import LaunchPlan
from spark_tui.ops.cluster import ClusterStatus, RankStatus, StopReport
from spark_tui.ops.events import (
    ClusterEvent,
    ClusterReady,
    Emit,
    Notice,
    RankState,
    RankStateChanged,
    ResultEvent,
)
from spark_tui.service.session import Session
from spark_tui.service.ssh_nodes import SshNodes

GIB = 1024**3


class EngineNodes(SshNodes):
    """See module doc. `argvs` holds every launch's per-rank argv as the engines ran it.
    Smoke checks and benchmarks reach the engines' API over HTTP as the product does."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__([InventoryNode(n.name, n.address, user="nvidia") for n in two_nodes()])
        self.log_dir = log_dir
        self.service: SimService | None = None
        self.running_plan: LaunchPlan | None = None
        self.running_argvs: list[list[str]] = []
        self.argvs: list[list[list[str]]] = []

    async def open(self, *, strict: bool, confirm: Any) -> None:
        return None

    async def probe(self) -> list[NodeFacts]:
        return [
            dataclasses.replace(n, memory_available_bytes=120 * GIB, gpu_name="NVIDIA GB10")
            for n in two_nodes()
        ]

    async def status(self) -> list[ClusterStatus]:
        plan = self.running_plan
        if plan is None:
            return []
        ranks = [
            RankStatus(r.rank, r.node, r.container.name, "running", "Up", command=argv)
            for r, argv in zip(plan.ranks, self.running_argvs, strict=True)
        ]
        return [ClusterStatus(plan.cluster_id, plan.recipe, plan.settings_hash, plan.model, ranks)]

    async def image_flags(
        self, plan: LaunchPlan, *, pull: bool, emit: Emit[Notice] | None, wait: bool = True
    ) -> list[Finding]:
        """The flag check against the SIMULATED engine's own `vllm serve --help=all` (the
        engine these launches run), as the product asks the head's image."""
        from spark_tui.core.serve_flags import parse_help
        from spark_tui.ops.image_flags import argvs_findings, serve_argvs

        help_text = subprocess.run(
            [sys.executable, "-m", "spark_tui.sim.engine", "serve", "--help=all"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        table = parse_help(help_text)
        return argvs_findings(table, serve_argvs(plan), plan.head.container.image)

    async def launch(
        self, plan: LaunchPlan, replace_stale: Any, *, emit: Emit[ClusterEvent], **kw: Any
    ) -> None:
        ranks, port = loopback_ranks(plan.to_dict())
        self.argvs.append(ranks)
        service = SimService(ranks, port, self.log_dir / f"launch{len(self.argvs)}")
        for r in plan.ranks:
            emit(RankStateChanged(r.rank, r.node, RankState.CREATED))
        await asyncio.to_thread(service.start)
        self.service, self.running_plan, self.running_argvs = service, plan, ranks
        digests = {r.node: "sha256:simulated" for r in plan.ranks}
        emit(ResultEvent("launch", {"image_digests": digests}))
        for r in plan.ranks:
            emit(RankStateChanged(r.rank, r.node, RankState.READY, progress=1.0))
        emit(ClusterReady(plan.cluster_id, service.base_url))
        if kw.get("follow"):
            await asyncio.Event().wait()

    async def sample_link(
        self, cluster_id: str | None, emit: Any, *, interval: float, stop: Any
    ) -> None:
        """The engines run on this machine, not on nodes: no node to sample."""
        return None

    async def stop(self, cluster_id: str | None, emit: Any) -> StopReport:
        plan, service = self.running_plan, self.service
        self.running_plan, self.service = None, None
        if service is not None:
            await asyncio.to_thread(service.stop)
        removed = [(r.node, r.container.name) for r in plan.ranks] if plan else []
        return StopReport(removed=removed)

    async def close(self) -> None:
        if self.service is not None:
            await asyncio.to_thread(self.service.stop)
            self.service = None


class EngineSession(Session):
    """The product's Session over `nodes` (EngineNodes unless given)."""

    def __init__(self, log_dir: Path, nodes: EngineNodes | None = None, **kw: Any) -> None:
        super().__init__(nodes=nodes or EngineNodes(log_dir), **kw)

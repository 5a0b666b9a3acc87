"""TEST DOUBLE: a cockpit session that replays events recorded from a real demo launch.

`tests/ui/fixtures/demo_events.json` was captured once by `record_demo_events.py` from the
simulated Sparks (DemoSession) with pids, times, ports and paths normalised. Replaying it
gives the real app the real event sequence without a clock in the picture, so the SVG
snapshots and the fast Pilot tests are deterministic. It is not used by the product.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import ipaddress
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_tui.core.errors import UnreachableError
from spark_tui.core.facts import NodeFacts
from spark_tui.core.fit import Finding
from spark_tui.core.inventory import InventoryNode
from spark_tui.core.link import InterfaceRate
from spark_tui.core.plan import LaunchPlan
from spark_tui.core.serve_flags import FlagTable
from spark_tui.ops.bench import BenchConfig, BenchProgress, BenchResult, BenchUpdate
from spark_tui.ops.cluster import ClusterStatus, RankStatus, StopReport
from spark_tui.ops.events import (
    ClusterEvent,
    ClusterReady,
    Emit,
    LinkSample,
    LogLine,
    NodeMemory,
    NodeUnreachable,
    Notice,
    ProbeResult,
    RankState,
    RankStateChanged,
    ResultEvent,
    ServiceGauges,
    WatchAlert,
    WatchSample,
    WatchStarted,
)
from spark_tui.ops.launch import LaunchFailed
from spark_tui.ops.smoke import SmokeResult
from spark_tui.service.session import Session

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "demo_events.json"
_RECORDING: dict[str, Any] | None = None


def recording() -> dict[str, Any]:
    """The recorded demo (loaded once per test session)."""
    global _RECORDING
    if _RECORDING is None:
        _RECORDING = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return _RECORDING


def to_event(data: dict[str, Any]) -> ClusterEvent:
    """A recorded event dict back into its `ops.events` dataclass."""
    data = dict(data)
    kind = data.pop("type")
    if kind == "LogLine":
        if "scope" not in data:
            # Recorded before log lines carried their class's detail and scope: classify
            # them as the launch's watch does now (core.logclass).
            from spark_tui.core.logclass import classify

            found = classify(data["text"])
            data.update(detail=found.detail, scope=found.scope)
        return LogLine(**data)
    if kind == "RankStateChanged":
        data["state"] = RankState(data["state"])
        data["explaining_lines"] = tuple(data.get("explaining_lines") or ())
        return RankStateChanged(**data)
    if kind == "ClusterReady":
        return ClusterReady(**data)
    if kind == "Notice":
        return Notice(**data)
    if kind == "ResultEvent":
        return ResultEvent(**data)
    raise ValueError(f"unknown recorded event type {kind}")


def node_name(index: int) -> str:
    """The recording's name of node `index` (0-based: sim-spark-1 is the head)."""
    return f"sim-spark-{index + 1}"


def recorded_nodes(count: int) -> list[NodeFacts]:
    """The recorded nodes; beyond the two recorded, copies of the worker's facts under the
    next names and addresses (as `spark-tui demo --nodes N` numbers them)."""
    nodes = [NodeFacts.from_dict(n) for n in recording()["nodes"]]
    worker = recording()["nodes"][1]
    base = ipaddress.IPv4Address(worker["address"])
    for i in range(len(nodes), count):
        data = copy.deepcopy(worker)
        address = str(base + i - 1)
        data.update(name=node_name(i), hostname=node_name(i), address=address)
        for iface in data["interfaces"]:
            if iface["ipv4"] == worker["address"]:
                iface["ipv4"] = address
        nodes.append(NodeFacts.from_dict(data))
    return nodes[:count]


def recorded_events(scenario: str, ranks: int, failing: int) -> list[dict[str, Any]]:
    """The scenario's recorded events for `ranks` ranks: the worker's (rank 1's) events
    given to every worker rank under its own node's name, and in a failed launch its
    failure (and every line after ready) to rank `failing` alone."""
    out: list[dict[str, Any]] = []
    after_ready = False
    for data in recording()[scenario]["events"]:
        if data["type"] == "ClusterReady":
            after_ready = True
        if data.get("rank") != 1 or ranks == 2:
            out.append(data)
            continue
        dying = after_ready and recording()[scenario].get("failure")
        for rank in [failing] if dying else range(1, ranks):
            out.append({**data, "rank": rank, "node": node_name(rank)})
    if recording()[scenario].get("failure") and ranks > 2:
        # The launch removes the ranks that did not fail, each reported stopped.
        for rank in range(1, ranks):
            if rank != failing:
                stopped = {"rank": rank, "node": node_name(rank), "state": "stopped"}
                out.append(
                    {"type": "RankStateChanged", "progress": None, "reason": None, **stopped}
                )
    return out


@functools.cache
def _stand_in_flags() -> FlagTable:
    from spark_tui.core.serve_flags import parse_help

    out = subprocess.run(
        [sys.executable, "-m", "spark_tui.sim.engine", "serve", "--help=all"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return parse_help(out)


class ReplayNodes:
    """TEST DOUBLE of `Nodes` that replays the recording (see module doc):
    `scenario` is "launch" or "failed_launch"; `freeze_when(event)` stops the replay right
    after that event (the launch then hangs like a real one that is still loading);
    `host_key` asks the host-key question first; `smoke_fails` makes the tool-call check
    fail. The watch after ready gives fixed samples (`watch_alert`: then that alert);
    `outages` is a queue of NodeUnreachable events the launch emits after ready (giving up
    ends it as the real watch does). `sparks` (more than the two recorded) gives every
    extra node the worker's facts and every extra rank the worker's events; in a failed
    launch rank `failing_rank` (default: the last) is the one that dies. Evaluating, questions, records, tuning and comparing
    run as in the product."""

    def __init__(
        self,
        *,
        scenario: str = "launch",
        simulated: bool = True,
        freeze_when: Callable[[ClusterEvent], bool] | None = None,
        host_key: tuple[str, str] | None = None,
        smoke_fails: bool = False,
        watch_alert: WatchAlert | None = None,
        outages: asyncio.Queue[NodeUnreachable | None] | None = None,
        sparks: int = 2,
        failing_rank: int | None = None,
    ) -> None:
        self.node_count = sparks
        self.failing_rank = sparks - 1 if failing_rank is None else failing_rank
        nodes_facts = recorded_nodes(sparks)
        self.inventory = [
            InventoryNode(n.name, n.address, port=2222, user="nvidia") for n in nodes_facts
        ]
        self.simulated = simulated
        self.scenario = scenario
        self.freeze_when = freeze_when
        self.host_key = host_key
        self.smoke_fails = smoke_fails
        self.watch_alert = watch_alert
        self.outages = outages
        self.gave_up: list[str] = []
        self.calls: list[str] = []
        self.stopped: list[str] = []
        self.closed = False
        self.host_key_answer: bool | None = None
        self.launched: LaunchPlan | None = None
        self.bench_configs: list[BenchConfig] = []

    async def start(self) -> None:
        return None

    def sync_env(self) -> dict[str, str]:
        return dict(os.environ)

    async def open(self, *, strict: bool, confirm: Any) -> None:
        if self.host_key is not None and self.host_key_answer is None:
            self.host_key_answer = await confirm(*self.host_key)

    async def probe(self) -> list[NodeFacts]:
        self.calls.append("probe")
        nodes = recorded_nodes(self.node_count)
        if self.host_key_answer is False:
            nodes[0] = NodeFacts(
                nodes[0].name,
                nodes[0].address,
                errors=["host key refused (remedy: check the fingerprint)"],
            )
        return nodes

    async def status(self) -> list[ClusterStatus]:
        plan = self.launched
        if plan is None:
            return []
        ranks = [
            RankStatus(r.rank, r.node, r.container.name, "running", "Up", command=list(r.argv))
            for r in plan.ranks
        ]
        return [ClusterStatus(plan.cluster_id, plan.recipe, plan.settings_hash, plan.model, ranks)]

    def start_flag_table(self, head: str, image: str, cluster_id: str) -> None:
        return None  # the flag check below reads a table at once

    def hold_flag_tables(self) -> Callable[[], None]:
        return lambda: None  # no help run to hold

    async def image_flags(
        self, plan: LaunchPlan, *, pull: bool, emit: Emit[Notice] | None, wait: bool = True
    ) -> list[Finding]:
        """The flag check against the SIMULATED engine's own `vllm serve --help=all` (the
        recorded launches ran it), as the product asks the head's image."""
        from spark_tui.ops.image_flags import argvs_findings, serve_argvs

        table = _stand_in_flags()
        return argvs_findings(table, serve_argvs(plan), plan.head.container.image)

    async def abandon_flag_table(self, cluster_id: str) -> None:
        return None  # no help run of its own

    async def launch(
        self, plan: LaunchPlan, replace_stale: Any, *, emit: Emit[ClusterEvent], **kw: Any
    ) -> None:
        self.calls.append(f"launch {plan.cluster_id}")
        self.launched = plan
        recorded = recording()[self.scenario]
        ranks = len(plan.ranks)
        for data in recorded_events(self.scenario, ranks, self.failing_rank):
            event = to_event(data)
            emit(event)
            await asyncio.sleep(0)
            if self.freeze_when is not None and self.freeze_when(event):
                await asyncio.Event().wait()  # frozen here until the cockpit stops it
        failure = recorded.get("failure")
        if failure:
            self.launched = None
            rank = self.failing_rank if ranks > 2 else 1
            message = failure["message"].replace(
                "rank 1 on sim-spark-2", f"rank {rank} on {node_name(rank)}"
            )
            raise LaunchFailed(message, failure["remedy"], rank=rank, node=node_name(rank))
        while self.outages is not None:
            outage = await self.outages.get()
            if outage is None:  # the user gave up waiting: the watch ends, ranks untouched
                raise UnreachableError(
                    "sim-spark-2: gave up after an outage; stopped watching cluster "
                    f"{plan.cluster_id}, its ranks were left as they are",
                    "when the node answers again, `spark-tui status` shows the ranks",
                )
            emit(outage)
        await asyncio.Event().wait()  # a real launch keeps following the logs

    async def watch(self, cluster_id: str | None, *, emit: Emit[WatchSample], **kw: Any) -> None:
        self.calls.append(f"watch {cluster_id}")
        plan = self.launched
        nodes = recorded_nodes(self.node_count)
        emit(
            WatchStarted(
                str(cluster_id),
                plan.recipe if plan else None,
                tuple(n.name for n in nodes),
                "http://127.0.0.1:40000",
            )
        )
        samples: list[WatchSample] = [
            ProbeResult(True, 0.015, 200),
            ServiceGauges(1, 0, 0.042, None, None),
            *(NodeMemory(n.name, n.memory_total_bytes, 21 * 1024**3) for n in nodes),
            ServiceGauges(1, 0, 0.042, 38.5, 120.0),
        ]
        for sample in samples:
            emit(sample)
            await asyncio.sleep(0)
        if self.watch_alert is not None:
            emit(self.watch_alert)
            return
        await asyncio.Event().wait()  # samples every few seconds, until cancelled

    async def sample_link(
        self, cluster_id: str | None, emit: Any, *, interval: float, stop: asyncio.Event
    ) -> None:
        """Each node's memory and its cabled port as a benchmark of the recorded cluster saw
        them (the first sample has no rate yet), then nothing until stopped."""
        self.calls.append(f"sample_link {cluster_id}")
        nodes = [NodeFacts.from_dict(n) for n in recording()["nodes"]]
        speed = 200000 * 1e6 / 8
        for rate in (None, 1.84e9):
            for i, n in enumerate(nodes):
                iface = n.connectx_up[0].netdev if n.connectx_up else "enp1s0f1np1"
                moved = 10**9 * (i + 1) + (0 if rate is None else int(rate))
                sample = InterfaceRate(iface, rate, rate, speed, moved, moved)
                emit(LinkSample(n.name, n.memory_total_bytes, 21 * 1024**3, (sample,)))
            await asyncio.sleep(0)
        await stop.wait()

    async def attach(self, cluster_id: str, *, emit: Emit[ClusterEvent], **kw: Any) -> None:
        self.calls.append(f"attach {cluster_id}")
        await asyncio.Event().wait()  # follows the cluster until cancelled

    async def stop(self, cluster_id: str | None, emit: Any) -> StopReport:
        self.calls.append(f"stop {cluster_id}")
        self.stopped.append(str(cluster_id))
        plan, self.launched = self.launched, None
        removed = [(r.node, r.container.name) for r in plan.ranks] if plan else []
        return StopReport(removed=removed)

    async def smoke_checks(
        self, target: Any, timeout: float, emit: Emit[SmokeResult]
    ) -> list[SmokeResult]:
        self.calls.append("smoke")
        results = []
        for data in copy.deepcopy(recording()["smoke"]):
            if self.smoke_fails and data["name"] == "tool_call":
                data.update(
                    ok=False,
                    detail="plain-text answer, no tool_calls (finish_reason stop)",
                    cause="the model answered in plain text: tool calling is not set up",
                    remedy="set tool_call_parser and enable_auto_tool_choice in the recipe",
                )
            results.append(SmokeResult.from_dict(data))
            emit(results[-1])
        return results

    def bench_run(self, target: Any, config: BenchConfig, emit: Emit[BenchUpdate]) -> Any:
        self.calls.append("bench")
        self.bench_configs.append(config)

        class Replayed:
            result = BenchResult.from_dict(copy.deepcopy(recording()["bench"]))

            async def run(self) -> BenchResult:
                self.result.config = config  # measured with the settings asked for
                emit(BenchProgress(0, 3, 1, 0, 1, 2, 0, 0.1))
                for level in self.result.levels:
                    emit(level)
                await asyncio.sleep(0)
                return self.result

        return Replayed()

    async def close(self) -> None:
        self.calls.append("close")
        self.closed = True


class ReplaySession(Session):
    """The product's Session over `nodes` (ReplayNodes with `kw` unless given)."""

    def __init__(self, nodes: ReplayNodes | None = None, **kw: Any) -> None:
        replay = nodes or ReplayNodes(**kw)
        super().__init__(
            nodes=replay,
            label=f"REPLAY · {replay.node_count} recorded simulated 128 GB Sparks (test double)",
            reattach_hint="`spark-tui --hosts sim-spark-1,sim-spark-2` (it re-attaches)",
        )

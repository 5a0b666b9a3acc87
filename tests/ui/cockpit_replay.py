"""TEST DOUBLE: a cockpit backend that replays events recorded from a real demo launch.

`tests/ui/fixtures/demo_events.json` was captured once by `record_demo_events.py` from the
simulated Sparks (DemoBackend) with pids, times, ports and paths normalised. Replaying it
gives the real app the real event sequence without a clock in the picture, so the SVG
snapshots and the fast Pilot tests are deterministic. It is not used by the product.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from spark_tui.core.errors import OperationFailed
from spark_tui.core.facts import NodeFacts
from spark_tui.core.plan import LaunchPlan
from spark_tui.ops.events import (
    ClusterReady,
    Event,
    LogLine,
    Notice,
    RankState,
    RankStateChanged,
    ResultEvent,
)
from spark_tui.ui.backend import HostKeyConfirm, NodeProbe, Progress, RunningCluster

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "demo_events.json"
_RECORDING: dict[str, Any] | None = None


def recording() -> dict[str, Any]:
    """The recorded demo (loaded once per test session)."""
    global _RECORDING
    if _RECORDING is None:
        _RECORDING = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return _RECORDING


def to_event(data: dict[str, Any]) -> Event:
    """A recorded event dict back into its `ops.events` dataclass."""
    data = dict(data)
    kind = data.pop("type")
    if kind == "LogLine":
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


class ReplayBackend:
    """Replays the recording (see module doc). `scenario` is "launch" or "failed_launch";
    `freeze_when(event)` stops the replay right after that event (the launch then hangs
    like a real one that is still loading); `host_key` asks the confirm callback first."""

    def __init__(
        self,
        *,
        scenario: str = "launch",
        simulated: bool = True,
        freeze_when: Callable[[Event], bool] | None = None,
        host_key: tuple[str, str] | None = None,
        smoke_fails: bool = False,
    ) -> None:
        self.simulated = simulated
        self.label = "REPLAY · 2 recorded simulated 128 GB Sparks (test double)"
        self.reattach_hint = "`spark-tui --hosts sim-spark-1,sim-spark-2` (it re-attaches)"
        self.scenario = scenario
        self.freeze_when = freeze_when
        self.host_key = host_key
        self.smoke_fails = smoke_fails
        self.calls: list[str] = []
        self.stopped: list[str] = []
        self.closed = False
        self.host_key_answer: bool | None = None

    # -- nodes
    def _probes(self) -> list[NodeProbe]:
        nodes = [NodeFacts.from_dict(n) for n in recording()["nodes"]]
        return [NodeProbe(n.name, n) for n in nodes]

    async def start(self) -> None:
        self.calls.append("start")

    async def discover(self, confirm: HostKeyConfirm) -> list[NodeProbe]:
        self.calls.append("discover")
        if self.host_key is not None:
            self.host_key_answer = await confirm(*self.host_key)
            if not self.host_key_answer:
                name = self._probes()[0].name
                return [
                    NodeProbe(name, None, "host key refused", "check the fingerprint"),
                    *self._probes()[1:],
                ]
        return self._probes()

    async def refresh(self) -> list[NodeProbe]:
        self.calls.append("refresh")
        return self._probes()

    # -- cluster
    async def launch(self, plan: LaunchPlan) -> AsyncIterator[Event]:
        self.calls.append(f"launch {plan.cluster_id}")
        recorded = recording()[self.scenario]
        for data in recorded["events"]:
            event = to_event(data)
            yield event
            await asyncio.sleep(0)
            if self.freeze_when is not None and self.freeze_when(event):
                await asyncio.Event().wait()  # frozen here until the cockpit stops it
        failure = recorded.get("failure")
        if failure:
            raise OperationFailed(failure["message"], failure["remedy"])
        await asyncio.Event().wait()  # a real launch keeps following the logs

    async def attach(self, cluster_id: str) -> AsyncIterator[Event]:
        self.calls.append(f"attach {cluster_id}")
        await asyncio.Event().wait()
        yield Notice("info", "unreachable")  # pragma: no cover - never reached

    async def running(self) -> RunningCluster | None:
        return None

    async def stop(self, cluster_id: str) -> list[str]:
        self.calls.append(f"stop {cluster_id}")
        self.stopped.append(cluster_id)
        return []

    async def smoke(self, base_url: str, model: str | None) -> list[dict[str, Any]]:
        self.calls.append("smoke")
        results = copy.deepcopy(recording()["smoke"])
        if self.smoke_fails:
            tool = next(r for r in results if r["name"] == "tool_call")
            tool.update(
                ok=False,
                detail="plain-text answer, no tool_calls (finish_reason stop)",
                cause="the model answered in plain text: tool calling is not set up",
                remedy="set tool_call_parser and enable_auto_tool_choice in the recipe",
            )
        return results

    async def bench(
        self, base_url: str, model: str | None, concurrency: list[int], progress: Progress
    ) -> dict[str, Any]:
        self.calls.append("bench")
        progress("benchmark: concurrency 1 (1/3)")
        return copy.deepcopy(recording()["bench"])

    async def close(self) -> None:
        self.calls.append("close")
        self.closed = True

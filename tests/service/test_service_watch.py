"""The session's watch action, and the alert a launch gives when it fails after ready (the
seams that reach the nodes replaced by a double; the rest runs as in the product)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.facts import NodeFacts, parse_facts
from spark_tui.core.inventory import InventoryNode
from spark_tui.core.plan import LaunchPlan
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.cluster import ClusterStatus, RankTail, StopReport
from spark_tui.ops.events import Emit, Notice
from spark_tui.ops.history import History
from spark_tui.ops.launch import LaunchFailed
from spark_tui.service import events as ev
from spark_tui.service.session import Session

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "simulated_facts_glm53_2x128.json"
WORKER_SAYS = "[spark-tui simulated node failure] rank 1 exits now"
HEAD_SAYS = "RuntimeError: NCCL error: remote process exited or there was a network error"


class DoubleNodes:
    """TEST DOUBLE of `Nodes`: two simulated Sparks from recorded facts; a launch that gets
    ready, then (`fail_after_ready`) loses its worker and then its head; a watch that
    yields `samples`; a stop that reads `tails` of the ranks it removes."""

    simulated = True

    def __init__(self, *, fail_after_ready: bool = True, fail_before_ready: bool = False) -> None:
        self.facts = parse_facts(FACTS.read_text())
        self.inventory = [InventoryNode(n.name, n.address) for n in self.facts]
        self.fail_after_ready = fail_after_ready
        self.fail_before_ready = fail_before_ready
        self.watched: list[tuple[str | None, dict[str, Any]]] = []
        self.samples: list[Any] = []
        self.stopped: list[str | None] = []
        self.tails: list[RankTail] = []  # what a stop reads of each rank before removing it

    async def start(self) -> None:
        return None

    def sync_env(self) -> dict[str, str]:
        return dict(os.environ)

    async def close(self) -> None:
        return None

    async def open(self, *, strict: bool, confirm: Any) -> None:
        return None

    async def probe(self) -> list[NodeFacts]:
        return [dataclasses.replace(n) for n in self.facts]

    async def status(self) -> list[ClusterStatus]:
        return []

    async def stop(self, cluster_id: str | None, emit: Any) -> StopReport:
        self.stopped.append(cluster_id)
        removed = [(t.node, t.container) for t in self.tails]
        return StopReport(removed=removed, tails=list(self.tails))

    def start_flag_table(self, head: str, image: str, cluster_id: str) -> None:
        return None  # the flag check below reads a table at once

    def hold_flag_tables(self) -> Callable[[], None]:
        return lambda: None  # no help run to hold

    async def image_flags(
        self, plan: LaunchPlan, *, pull: bool, emit: Emit[Notice] | None, wait: bool = True
    ) -> list[Any]:
        return []  # every flag known to the image's vLLM

    async def abandon_flag_table(self, cluster_id: str) -> None:
        return None  # no help run of its own

    async def launch(
        self, plan: LaunchPlan, replace_stale: Any, *, emit: Emit[ev.ClusterEvent], **kw: Any
    ) -> None:
        head, worker = plan.ranks[0], plan.ranks[1]
        for r in plan.ranks:
            emit(ev.RankStateChanged(r.rank, r.node, ev.RankState.CREATED))
        if not self.fail_before_ready:
            emit(ev.ClusterReady(plan.cluster_id, "http://127.0.0.1:40000"))
        if self.fail_after_ready or self.fail_before_ready:
            emit(
                ev.RankStateChanged(
                    worker.rank,
                    worker.node,
                    ev.RankState.FAILED,
                    reason="was killed (code 137)",
                    explaining_lines=(WORKER_SAYS,),
                )
            )
            emit(
                ev.RankStateChanged(
                    head.rank,
                    head.node,
                    ev.RankState.FAILED,
                    reason="exited with code 1",
                    explaining_lines=(HEAD_SAYS,),
                )
            )
            raise LaunchFailed(
                f"rank 1 on {worker.node} was killed",
                "read the lines above",
                rank=worker.rank,
                node=worker.node,
            )
        await asyncio.Event().wait()

    async def watch(self, cluster_id: str | None, *, emit: Emit[ev.WatchSample], **kw: Any) -> None:
        self.watched.append((cluster_id, kw))
        for sample in self.samples:
            emit(sample)


class Double(Session):
    """The product's Session over DoubleNodes (its `nodes`)."""

    nodes: DoubleNodes

    def __init__(self, *, history: History | None = None, **kw: Any) -> None:
        super().__init__(nodes=DoubleNodes(**kw), history=history)


async def launch_events(session: Double) -> tuple[list[Any], BaseException | None]:
    seen: list[Any] = []
    try:
        async for event in session.launch(find_recipe("glm-5.3-flash"), {}, insist=True):
            seen.append(event)
    except LaunchFailed as exc:
        return seen, exc
    return seen, None


async def test_a_failure_after_ready_is_one_alert_with_the_heads_lines() -> None:
    session = Double()
    seen, error = await launch_events(session)
    assert isinstance(error, LaunchFailed)
    alerts = [e for e in seen if isinstance(e, ev.WatchAlert)]
    assert len(alerts) == 1
    alert = alerts[0]
    worker = session.nodes.facts[1].name
    assert (alert.rank, alert.node, alert.reason) == (1, worker, "was killed (code 137)")
    assert alert.lines == (WORKER_SAYS,)
    assert alert.head_lines == (HEAD_SAYS,)
    assert alert.others == (f"rank 0 on {session.nodes.facts[0].name} exited with code 1",)
    # it comes after every rank's state, before the launch's error
    assert seen.index(alert) > max(
        i for i, e in enumerate(seen) if isinstance(e, ev.RankStateChanged)
    )


async def test_a_failure_before_ready_is_no_alert() -> None:
    seen, error = await launch_events(Double(fail_before_ready=True))
    assert isinstance(error, LaunchFailed)
    assert not [e for e in seen if isinstance(e, ev.WatchAlert)]


@pytest.mark.parametrize("named", [None, "abcd1234"])
async def test_watch_watches_our_cluster_unless_told_which(named: str | None) -> None:
    session = Double(fail_after_ready=False)
    samples = [
        ev.WatchStarted("x", "glm-5.3-flash", ("a", "b"), "http://127.0.0.1:1"),
        ev.ServiceGauges(1, 0, 0.5, 10.0, 20.0),
        ev.WatchAlert(0, "a", "is hung"),
    ]
    session.nodes.samples = samples
    gen = session.launch(find_recipe("glm-5.3-flash"), {}, insist=True)
    async for event in gen:
        if isinstance(event, ev.ClusterReady):
            break
    await gen.aclose()
    assert session.cluster is not None and session.cluster.ready
    got = [e async for e in session.watch(named, interval=0.5)]
    assert got[: len(samples)] == samples
    assert [type(e) for e in got[len(samples) :]] == [ev.Stopped, ev.Notice]
    ours = session.cluster.cluster_id
    assert session.nodes.watched == [
        (named or ours, {"interval": 0.5, "request_timeout": 10.0, "cleanup": None})
    ]


def test_the_watchs_tiny_request_is_ours_a_users_request_is_not() -> None:
    from spark_tui.core.logclass import classify
    from spark_tui.ops.watch import PROBE_MARK
    from spark_tui.service.logs import is_own_request

    def line(path: str) -> ev.LogLine:
        text = f'INFO:     127.0.0.1:36942 - "POST {path} HTTP/1.1" 200 OK'
        found = classify(text)
        return ev.LogLine(0, "a", text, found.kind, None, found.detail, found.scope)

    assert is_own_request(line(f"/v1/chat/completions?{PROBE_MARK}"))
    assert not is_own_request(line("/v1/chat/completions"))


async def _ready(session: Double) -> Any:
    """Launch to ready and leave the launch's follow running: (the generator, cluster)."""
    gen = session.launch(find_recipe("glm-5.3-flash"), {}, insist=True)
    async for event in gen:
        if isinstance(event, ev.ClusterReady):
            break
    assert session.cluster is not None and session.cluster.ready
    return gen, session.cluster


def _failing(cluster_id: str) -> list[Any]:
    return [
        ev.WatchStarted(cluster_id, "glm-5.3-flash", ("a", "b"), "http://127.0.0.1:1"),
        ev.WatchAlert(1, "b", "was killed (code 137)", (WORKER_SAYS,)),
    ]


async def test_after_a_watch_alert_every_rank_is_stopped_and_its_lines_kept(
    tmp_path: Path,
) -> None:
    history = History(tmp_path / "history")
    session = Double(fail_after_ready=False, history=history)
    gen, cluster = await _ready(session)
    await gen.aclose()  # the launch no longer follows it: the watch settles the failure
    cid, run = cluster.cluster_id, cluster.launch_run
    assert run is not None
    session.nodes.samples = _failing(cid)
    session.nodes.tails = [
        RankTail(cid, 0, "a", f"spark-tui-{cid}-r0", ["head line"]),
        RankTail(cid, 1, "b", f"spark-tui-{cid}-r1", [WORKER_SAYS], exit_code=137),
    ]
    got = [e async for e in session.watch(interval=0.5, cleanup="spark-tui stop --hosts a,b")]
    assert session.nodes.watched[0][1]["cleanup"] is None, "nothing is left to clean up"
    assert session.nodes.stopped == [cid]
    stopped, said = got[-2:]
    assert isinstance(stopped, ev.Stopped) and len(stopped.removed) == 2
    assert isinstance(said, ev.Notice) and said.message == (
        f"every rank of cluster {cid} was stopped and removed; their last log lines are kept "
        "in the history"
    )
    kept = history.get_run(run.id)
    assert kept.ok is False
    assert kept.failure == "failed after it was ready: rank 1 on b was killed (code 137)"
    assert [(r.rank, Path(r.path).read_text().strip()) for r in kept.rank_logs] == [
        (0, "head line"),
        (1, WORKER_SAYS),
    ]
    assert not session.cluster.running


async def test_keep_failed_leaves_every_rank_and_the_alert_names_the_clean_up(
    tmp_path: Path,
) -> None:
    session = Double(fail_after_ready=False, history=History(tmp_path / "history"))
    gen, cluster = await _ready(session)
    await gen.aclose()
    session.nodes.samples = _failing(cluster.cluster_id)
    got = [
        e
        async for e in session.watch(
            interval=0.5, cleanup="spark-tui stop --hosts a,b", keep_failed=True
        )
    ]
    assert session.nodes.watched[0][1]["cleanup"] == "spark-tui stop --hosts a,b"
    assert session.nodes.stopped == []
    said = got[-1]
    assert isinstance(said, ev.Notice) and said.level == "warning"
    assert "kept for inspection" in said.message
    assert session.cluster.running, "its ranks are still there: `s` stops them"


async def test_a_watch_beside_the_launchs_follow_leaves_the_failure_to_the_follow(
    tmp_path: Path,
) -> None:
    """The cockpit watches the cluster it launched while the launch follows its ranks: the
    follow stops the other ranks (or keeps them), once, not the watch too."""
    session = Double(fail_after_ready=False, history=History(tmp_path / "history"))
    gen, cluster = await _ready(session)
    try:
        session.nodes.samples = _failing(cluster.cluster_id)
        got = [e async for e in session.watch(interval=0.5)]
        assert got == session.nodes.samples
        assert session.nodes.stopped == []
    finally:
        await gen.aclose()

"""RankLogFollower across an outage longer than any reconnect budget, against a Docker
stand-in whose node stays unreachable until the test lets it back: the follower waits,
reports every failed attempt, and resumes without losing or repeating a line."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from spark_tui.core.errors import UnreachableError
from spark_tui.ops.logs import FollowUpdate, RankLogFollower
from spark_tui.remote.docker_remote import LogRecord
from spark_tui.remote.ssh import Outage

BASE = 1_764_000_000_000_000_000


def rec(i: int) -> LogRecord:
    return LogRecord(stamp=f"t{i}", ts_ns=BASE + i * 1_000_000, text=f"line {i}")


class _Stream:
    def __init__(self, records: list[LogRecord]) -> None:
        self._records = records

    async def records(self) -> AsyncIterator[LogRecord]:
        for r in self._records:
            await asyncio.sleep(0)
            yield r

    def close(self) -> None:
        pass


class _Conn:
    closed = False


class OutageDocker:
    """Log lines 1-3, then the link drops; while `down`, every call is unreachable."""

    node = "spark-b"

    def __init__(self) -> None:
        self.conn = _Conn()
        self.down = False
        self.back = asyncio.Event()
        self.opened: list[int | None] = []
        self.running = True

    def _check(self) -> None:
        if self.down:
            raise UnreachableError("spark-b: connection refused", "check that sshd runs")

    async def stream_logs(self, name: str, *, tail: Any = "all", since_ns: Any = None) -> _Stream:
        self._check()
        self.opened.append(since_ns)
        if len(self.opened) == 1:
            self.down = True  # the link drops right after these lines
            return _Stream([rec(1), rec(2), rec(3)])
        # Resumed from just before line 3: Docker sends it again, then what came since.
        self.running = False
        return _Stream([rec(3), rec(4), rec(5), rec(6)])

    async def inspect(self, name: str) -> dict[str, Any]:
        self._check()
        return {"State": {"Running": self.running}}

    async def logs(self, name: str, **_kw: Any) -> list[LogRecord]:
        self._check()
        return []

    async def reconnect(self) -> None:
        self._check()

    async def reconnect_patiently(self, report: Any = None) -> None:
        attempt = 0
        while self.down:
            attempt += 1
            report(Outage(self.node, attempts=attempt, reason="connection refused", retry_in=0.01))
            await asyncio.sleep(0.01)


async def test_an_outage_of_any_length_is_waited_out_without_loss_or_repeat() -> None:
    docker = OutageDocker()
    reports: list[Outage] = []
    backs: list[Outage] = []
    follower = RankLogFollower(
        docker,  # type: ignore[arg-type]
        "spark-tui-x-r1",
        resume_pause=0.01,
    )
    got: list[str] = []

    def seen(item: FollowUpdate) -> None:
        if isinstance(item, Outage):
            (reports if item.ended is None else backs).append(item)
        else:
            got.append(item.text)

    task = asyncio.create_task(follower.follow(seen))
    while len(reports) < 30:  # far past a bounded budget of 5 attempts
        assert not task.done(), task
        await asyncio.sleep(0.01)
    assert got == ["line 1", "line 2", "line 3"]
    docker.down = False
    await asyncio.wait_for(task, 5)
    assert got == [f"line {i}" for i in range(1, 7)], "nothing lost, nothing twice"
    assert reports[0].reason.startswith("spark-b: connection refused")
    assert all(r.node == "spark-b" and r.remedy for r in reports)
    assert len(backs) == 1 and backs[0].ended is not None and backs[0].attempts >= 29
    assert follower.outages == 1


async def test_the_watch_reports_an_outage_as_a_state_asks_after_a_while_and_can_give_up() -> None:
    import time

    from spark_tui.ops.events import NodeReachable, NodeUnreachable, Notice
    from spark_tui.ops.launch import ClusterWatch, WatchedRank

    events: list[Any] = []
    rank = WatchedRank(
        rank=1,
        node="spark-b",
        name="c-r1",
        serves_api=False,
        conn=None,
        docker=None,  # type: ignore[arg-type]
    )
    watch = ClusterWatch("c", [rank], events.append, ask_after=120)
    early = Outage(
        "spark-b", started=time.monotonic() - 3, attempts=2, reason="refused", remedy="r"
    )
    late = Outage(
        "spark-b", started=time.monotonic() - 130, attempts=9, reason="refused", remedy="r"
    )
    watch._node_down(rank, early)
    watch._node_down(rank, late)
    notices = [e for e in events if isinstance(e, Notice)]
    down = [e for e in events if isinstance(e, NodeUnreachable)]
    assert len(notices) == 1 and notices[0].level == "warning", "one notice per outage"
    assert [(e.node, e.ranks, e.ask) for e in down] == [
        ("spark-b", (1,), False),
        ("spark-b", (1,), True),
    ]
    assert "unreachable since 130 s" in down[1].text
    down[1].give_up()
    r, why = watch._ended.get_nowait()
    assert r is rank and why.startswith("gave up")
    lost = watch._lost(r, why)
    assert "spark-b" in lost.message and "left as they are" in lost.message
    assert "spark-tui stop" in lost.remedy
    late.ended = time.monotonic()
    watch._node_back(rank, late)
    assert isinstance(events[-2], NodeReachable) and events[-2].outage_seconds >= 130

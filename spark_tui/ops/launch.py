"""Launch a plan: one container per rank, head first, then watch every rank until ready.

`launch(plan, pool, emit=...)` hands `ops.events` objects to `emit` as it goes:
- preflight: stale containers of ours on the nodes are listed and removed only after a
  yes (`replace_stale` callback); the image is checked on every node (pulled with
  progress when missing, or when a resolved nightly's digest is not the node's) and
  nodes that end with differing digests refuse the launch before any rank starts;
  the mount folders are created (`mkdir -p`, each path quoted);
- start: the head's container, then every worker's at once (secrets resolved from the
  local environment at this moment and never logged): RankStateChanged created/starting;
- watch (see `ClusterWatch`): every rank's log is followed and classified (LogLine,
  loading progress, a worker's "ready"); readiness is GET /health == 200 through an SSH
  port forward to the head's API port, then ClusterReady(base_url of the forward).
When a rank fails (its container exits, or the API does not come up in time) the other
ranks are stopped and removed (unless `keep_failed`), a FAILED event carries the reason
and the log lines that explain it, and the launch raises `LaunchFailed`.
A node that cannot be reached is not a failure: NodeUnreachable events say so after every
attempt to re-open its connection (capped backoff, for as long as the caller lets it;
`NodeUnreachable.give_up()` ends the watch with UnreachableError, ranks untouched), and
NodeReachable when its logs resume, without loss or repeat.

Interrupting (cancelling the launch) while the ranks are being started removes every
container of the plan's cluster before it ends (calls already sent to Docker
are let finish first, so none is created after the clean-up). Once every rank has started
the caller decides what to do with them (headless: `ops.cluster.stop(pool, cluster_id)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_tui.core import logclass, prelaunch
from spark_tui.core.errors import (
    InputError,
    LaunchFailed,
    OperationFailed,
    SparkError,
    UnreachableError,
)
from spark_tui.core.facts import ImageInfo
from spark_tui.core.launch_rules import rank_failure_remedy
from spark_tui.core.plan import LaunchPlan, RankSpec, resolve_argv, resolve_secrets
from spark_tui.core.timeouts import READY_TIMEOUT_S
from spark_tui.ops.cluster import (
    CLUSTER_LABEL,
    ROLE_LABEL,
    close_dockers,
    open_dockers,
    remove_ranks,
    stop,
)
from spark_tui.ops.events import (
    ClusterEvent,
    ClusterReady,
    Emit,
    LogLine,
    NodeReachable,
    NodeUnreachable,
    Notice,
    RankState,
    RankStateChanged,
    ResultEvent,
)
from spark_tui.ops.image_flags import FLAG_TABLE_ROLE, FlagTables
from spark_tui.ops.logs import FollowUpdate, RankLogFollower
from spark_tui.ops.mods import put_copies
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.hostkeys import HostKeyError
from spark_tui.remote.ssh import ConnectionPool, NodeConnection, Outage

if TYPE_CHECKING:
    import httpx


@dataclass
class StaleContainer:
    """A container in the way of a launch: ours from an earlier run, or a name clash."""

    node: str
    name: str
    state: str
    cluster_id: str | None
    ours: bool


# Given the stale containers, say yes to remove them.
StaleConfirm = Callable[[list[StaleContainer]], Awaitable[bool]]

_EXIT_MEANINGS = {
    0: "exited (code 0) although it should keep serving",
    1: "exited with code 1 (an error: see its log)",
    2: "exited with code 2 (bad arguments: see its log)",
    125: "could not be run by Docker (code 125)",
    126: "its command could not be executed (code 126)",
    127: "its command was not found in the image (code 127)",
    137: "was killed (code 137: SIGKILL, from `docker kill` or the kernel's OOM killer)",
    139: "crashed (code 139: segmentation fault)",
    143: "was stopped (code 143: SIGTERM)",
}


def exit_reason(state: Mapping[str, Any]) -> str:
    """Docker's container State as a human reason."""
    if state.get("OOMKilled"):
        return "was killed by the kernel's out-of-memory killer"
    if state.get("Error"):
        return f"failed to start: {state['Error']}"
    code = int(state.get("ExitCode") or 0)
    return _EXIT_MEANINGS.get(code, f"exited with code {code}")


@dataclass
class WatchedRank:
    """What the watch knows about one rank (`spec` is set when this process launched it)."""

    rank: int
    node: str
    name: str  # the container's
    serves_api: bool
    conn: NodeConnection
    docker: RemoteDocker
    spec: RankSpec | None = None
    state: RankState = RankState.CREATED
    progress: float = 0.0
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=500))
    classifier: logclass.StreamClassifier = field(default_factory=logclass.StreamClassifier)
    follower: RankLogFollower | None = None
    ended: bool = False
    last_phase: str | None = None  # the furthest startup phase its log showed


def _phase_index(phase: str | None) -> int:
    order = logclass.STARTUP_ORDER
    return order.index(phase) if phase in order else -1


# How often the head's /health is asked while it starts (and at once when its log says the
# API server is up).
HEALTH_POLL_S = 0.25
# Once the head's log says "Application startup complete.", how often and for how long it is
# asked: uvicorn logs that line before its socket listens (vLLM's is bound, not listening),
# so the first ask can be refused and the answer is a few milliseconds away, not a poll.
API_UP_POLL_S = 0.01
API_UP_WINDOW_S = 5.0

# Loading progress across phases: weights take most of the time, CUDA graphs the rest.
_PROGRESS_SPAN = {"weights": (0.0, 0.85), "cuda_graphs": (0.85, 1.0)}


class ClusterWatch:
    """Follows every rank of a started cluster and decides ready or failed (see module doc)."""

    def __init__(
        self,
        cluster_id: str,
        ranks: list[WatchedRank],
        emit: Emit[ClusterEvent],
        *,
        api_host: str = "127.0.0.1",
        api_port: int = 8000,
        keep_failed: bool = False,
        ready_timeout: float = READY_TIMEOUT_S,
        poll_interval: float | None = None,
        settle: float = 1.0,
        tail: int | str = "all",
        ask_after: float = 120.0,
    ) -> None:
        self.cluster_id = cluster_id
        self.ranks = ranks
        self.emit = emit
        self.api_host = api_host
        self.api_port = api_port
        self.keep_failed = keep_failed
        self.ready_timeout = ready_timeout
        self.poll_interval = HEALTH_POLL_S if poll_interval is None else poll_interval
        self.settle = settle
        self.tail = tail
        self.base_url: str | None = None
        self.ready = asyncio.Event()
        # Set when the head's log says its API server is up: /health is asked at once,
        # not at the next poll (the launch's share of launch-to-ready counts that wait).
        self._api_up = asyncio.Event()
        self.not_answering: str | None = None  # why a healthy head gave no first token
        self._ended: asyncio.Queue[tuple[WatchedRank, str]] = asyncio.Queue()
        self._stopping = False
        self._backlogs: set[int] = set()
        self._backlogs_in = asyncio.Event()
        # An outage of this length makes NodeUnreachable.ask True (time to ask the user).
        self.ask_after = ask_after
        self._unreachable: set[str] = set()  # nodes in an outage now

    # --- per rank ---------------------------------------------------------------------

    def _set(self, r: WatchedRank, state: RankState, **kw: Any) -> None:
        r.state = state
        self.emit(RankStateChanged(rank=r.rank, node=r.node, state=state, **kw))

    def _line(self, r: WatchedRank, text: str, stamp: str | None) -> None:
        r.lines.append(text)
        cls = r.classifier.classify(text)
        self.emit(LogLine(r.rank, r.node, text, cls.kind, stamp or None, cls.detail, cls.scope))
        if r.state in (RankState.READY, RankState.FAILED, RankState.STOPPED):
            return
        if cls.kind == "progress" and cls.progress is not None:
            lo, hi = _PROGRESS_SPAN.get(cls.scope or "", (r.progress, r.progress))
            value = round(lo + (hi - lo) * cls.progress, 3)
            if value >= r.progress + 0.01 or r.state is not RankState.LOADING:
                r.progress = max(value, r.progress)
                self._set(r, RankState.LOADING, progress=r.progress)
        elif cls.kind == "phase" and r.state is not RankState.LOADING:
            self._set(r, RankState.LOADING, progress=r.progress)
        if cls.kind == "phase" and _phase_index(cls.scope) > _phase_index(r.last_phase):
            r.last_phase = cls.scope
        elif cls.kind == "ready" and cls.scope == "api" and r.serves_api:
            self._api_up.set()
        elif cls.kind == "ready" and cls.scope == "worker" and not r.serves_api:
            r.progress = 1.0
            self._set(r, RankState.READY, progress=1.0)

    async def _follow(self, r: WatchedRank) -> None:
        why = "ended"
        try:
            backlog = []
            if self.tail != "all":
                # A backlog first (attach): its lines come before any live line or ready.
                backlog = await r.docker.logs(r.name, tail=self.tail)
                for rec in backlog:
                    self._line(r, rec.text, rec.stamp)
            r.follower = RankLogFollower(r.docker, r.name, tail=self.tail, seen=backlog)
            self._backlog_done(r)

            def update(item: FollowUpdate) -> None:
                if isinstance(item, Outage):
                    (self._node_down if item.ended is None else self._node_back)(r, item)
                else:
                    self._line(r, item.text, item.stamp)

            await r.follower.follow(update)
        except UnreachableError as exc:  # a changed host key: it stays refused
            why = f"lost: {exc.message}"
        except SparkError as exc:
            why = f"error: {exc.message}"
        finally:
            r.ended = True
            await self._ended.put((r, why))

    # --- outages: a state, never a failure ---------------------------------------------

    def _node_ranks(self, node: str) -> tuple[int, ...]:
        return tuple(x.rank for x in self.ranks if x.node == node)

    def _node_down(self, r: WatchedRank, outage: Outage) -> None:
        if r.node not in self._unreachable:
            self._unreachable.add(r.node)
            self.emit(
                Notice(
                    "warning",
                    f"{r.node} is unreachable ({outage.reason}); retrying, its rank(s) are "
                    "not failed for it and keep running",
                    outage.remedy,
                )
            )
        self.emit(
            NodeUnreachable(
                node=r.node,
                ranks=self._node_ranks(r.node),
                seconds=round(outage.seconds, 1),
                attempts=outage.attempts,
                retry_in=round(outage.retry_in, 2),
                reason=outage.reason,
                remedy=outage.remedy,
                ask=outage.seconds >= self.ask_after,
                _give_up=lambda: self._give_up(r.node, outage),
            )
        )

    def _node_back(self, r: WatchedRank, outage: Outage) -> None:
        if r.node not in self._unreachable:
            return  # another rank on this node already said so
        self._unreachable.discard(r.node)
        self.emit(
            NodeReachable(
                node=r.node, ranks=self._node_ranks(r.node), outage_seconds=round(outage.seconds, 1)
            )
        )
        self.emit(Notice("info", f"{r.node} is reachable again after {outage.seconds:.0f} s"))

    def _give_up(self, node: str, outage: Outage) -> None:
        r = next(x for x in self.ranks if x.node == node)
        why = f"gave up: unreachable for {outage.seconds:.0f} s ({outage.reason})"
        self._ended.put_nowait((r, why))

    def _lost(self, r: WatchedRank, why: str) -> UnreachableError:
        """The watch ends without touching any rank: the node cannot be watched."""
        detail = why.split(": ", 1)[1] if ": " in why else why
        return UnreachableError(
            f"{r.node}: {detail}; stopped watching cluster {self.cluster_id}, "
            "its ranks were left as they are",
            "when the node answers again, `spark-tui status` shows the ranks, "
            "`spark-tui logs --follow` follows them and `spark-tui stop` removes them",
        )

    def _backlog_done(self, r: WatchedRank) -> None:
        self._backlogs.add(r.rank)
        if len(self._backlogs) == len(self.ranks):
            self._backlogs_in.set()

    async def _wait_health(self) -> None:
        head = min(self.ranks, key=lambda r: r.rank)
        try:
            await self._poll_health(head)
        except UnreachableError as exc:
            await self._ended.put((head, f"lost: {exc.message}"))
        except SparkError as exc:
            await self._ended.put((head, f"error: {exc.message}"))

    async def _forward_api(self, head: WatchedRank) -> int:
        """The local end of a forward to the head's API, made once the head is reachable."""
        while True:
            try:
                return await head.conn.forward_local_port(self.api_host, self.api_port)
            except HostKeyError:
                raise
            except UnreachableError:
                await head.conn.reconnect_patiently()

    async def _poll_health(self, head: WatchedRank) -> None:
        await self._backlogs_in.wait()
        port = await self._forward_api(head)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.ready_timeout
        up_until = 0.0  # asked every API_UP_POLL_S until then: the head said its API is up
        # The API's client is loaded once the ranks run (a launch makes its containers
        # without it; the session loads it in a thread meanwhile, see Session.load_launch).
        import httpx

        async with httpx.AsyncClient(timeout=5.0) as client:
            while True:
                try:
                    resp = await client.get(base + "/health")
                    # Health alone is not ready: a head whose engine core died still says 200.
                    if resp.status_code == 200 and await self._first_token(client, base):
                        break
                except httpx.HTTPError:
                    pass  # not listening yet, or the forward is being re-made
                now = time.monotonic()
                if now > deadline:
                    await self._ended.put((head, "timeout"))
                    return
                if self._api_up.is_set():
                    self._api_up.clear()
                    up_until = now + API_UP_WINDOW_S
                if now < up_until:
                    await asyncio.sleep(API_UP_POLL_S)
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._api_up.wait(), self.poll_interval)
        self.base_url = base
        for r in self.ranks:
            if r.state not in (RankState.READY, RankState.FAILED):
                r.progress = 1.0
                self._set(r, RankState.READY, progress=1.0)
        self.emit(ClusterReady(cluster_id=self.cluster_id, base_url=base))
        self.ready.set()

    async def _first_token(self, client: httpx.AsyncClient, base: str) -> bool:
        """Whether a 1-token streamed completion brings its first token (as sparkrun checks
        readiness); the last refusal is kept for the timeout's reason."""
        # The key the plan resolved from this machine's environment, when the server has one.
        key = os.environ.get("VLLM_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        models = await client.get(base + "/v1/models", headers=headers)
        if models.status_code == 401:
            return True  # a key this machine does not hold: the API answers, no more to see
        data = models.json().get("data") if models.status_code == 200 else None
        if not data:
            self.not_answering = f"/v1/models answered {models.status_code}"
            return False
        body = {"model": data[0]["id"], "prompt": "ready?", "max_tokens": 1, "stream": True}
        url = base + "/v1/completions"
        async with client.stream("POST", url, json=body, headers=headers) as resp:
            if resp.status_code != 200:
                text = (await resp.aread()).decode(errors="replace")
                self.not_answering = f"a 1-token request got {resp.status_code}: {text[:160]}"
                return False
            async for line in resp.aiter_lines():
                if line.startswith("data:") and '"choices"' in line:
                    return True
        self.not_answering = "a 1-token request ended without a token"
        return False

    # --- failure --------------------------------------------------------------------------

    async def _explain(self, r: WatchedRank, why: str) -> tuple[str, tuple[str, ...]]:
        """(reason, lines that explain it); no lines when the classifier recognises none."""
        lines = tuple(logclass.explain_failure(list(r.lines)))
        if why == "timeout" and self.not_answering:
            return (
                f"/health said 200 but no first token came within {self.ready_timeout:g} s "
                f"({self.not_answering})",
                lines,
            )
        if why == "timeout":
            reason = f"the API did not answer /health within {self.ready_timeout:g} s"
            missing = self._missing_ranks()
            if missing:
                reason += "; " + "; ".join(
                    f"rank {m.rank} on {m.node} never became ready (its last startup step: "
                    f"{m.last_phase or 'none logged'})"
                    for m in missing
                )
            return (reason, lines)
        if why.startswith("error"):
            return (why, lines)
        info = await r.docker.inspect(r.name)
        if info is None:
            return ("its container disappeared (removed from outside spark-tui)", lines)
        step = prelaunch.failed_step(list(r.lines))
        if step is not None:  # a mod failed: vllm serve never started, its lines say why
            return (
                f"its {step.what} failed with exit code {step.exit_code} before vllm serve started",
                step.lines,
            )
        return (exit_reason(info.get("State") or {}), lines)

    def _missing_ranks(self) -> list[WatchedRank]:
        """The workers a head that never came up was waiting for: those not ready, and of
        them the ones behind the furthest rank when some got further than others."""
        waiting = [r for r in self.ranks if not r.serves_api and r.state is not RankState.READY]
        if not waiting:
            return []
        furthest = max(_phase_index(r.last_phase) for r in self.ranks)
        behind = [r for r in waiting if _phase_index(r.last_phase) < furthest]
        return behind or waiting

    def _stuck_at_rendezvous(self) -> bool:
        """Whether the workers the head waited for never got past the rendezvous."""
        missing = self._missing_ranks()
        met = _phase_index("distributed_init")
        return bool(missing) and all(_phase_index(m.last_phase) <= met for m in missing)

    @staticmethod
    def _last_lines(r: WatchedRank) -> tuple[str, ...]:
        """The rank's last lines: the best evidence when nothing is recognised as an error."""
        return tuple([t for t in r.lines if t.strip()][-3:])

    async def _fail(
        self, first: WatchedRank, why: str, followers: list[asyncio.Task[None]]
    ) -> LaunchFailed:
        failed: list[tuple[WatchedRank, str]] = [(first, why)]
        # Let the other ranks react for a moment: their last lines often say more.
        deadline = time.monotonic() + self.settle
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                r, w = await asyncio.wait_for(self._ended.get(), remaining)
            except TimeoutError:
                break
            if r.state is not RankState.FAILED and all(r is not f for f, _ in failed):
                failed.append((r, w))
        reasons: dict[int, tuple[str, tuple[str, ...]]] = {}
        for r, w in failed:
            reasons[r.rank] = await self._explain(r, w)
            reason, lines = reasons[r.rank]
            self._set(
                r, RankState.FAILED, reason=reason, explaining_lines=lines or self._last_lines(r)
            )
        self._stopping = True
        for t in followers:
            t.cancel()
        for r in self.ranks:
            if r.follower is not None:
                r.follower.close()
        reason, lines = reasons[first.rank]
        where = f"rank {first.rank} on {first.node}"
        said = [line for _, ls in reasons.values() for line in ls]
        specs = [r.spec for r in self.ranks if r.spec is not None]
        # Real vLLM's ranks that cannot reach the head say nothing until torch's own
        # timeout (10 min): a ready timeout with workers stuck there is that case.
        never_met = any(w == "timeout" for _, w in failed) and self._stuck_at_rendezvous()
        logged = {r.rank: list(r.lines) for r in self.ranks}
        cause = rank_failure_remedy(said, specs, never_met=never_met, logged=logged)
        if self.keep_failed:
            self.emit(Notice("warning", "the other ranks are kept for inspection (--keep-failed)"))
            kept = "inspect them (`spark-tui logs`), then `spark-tui stop`"
            remedy = f"{cause}; the ranks are kept: {kept}" if cause else kept
        else:
            targets = [(r.node, r.name, r.rank) for r in self.ranks]
            dockers = {r.node: r.docker for r in self.ranks}
            await remove_ranks(dockers, targets, emit=self._stopped_emit, stop_timeout=5)
            remedy = cause or "read the lines above; fix the cause and launch again"
        if not lines:
            # A rank killed from outside says nothing; the ranks that lost it often do.
            others = [reasons[r.rank][1] for r, _ in failed[1:] if reasons[r.rank][1]]
            lines = others[0] if others else self._last_lines(first)
        return LaunchFailed(
            f"{where} {reason}", remedy, rank=first.rank, node=first.node, lines=lines
        )

    def _stopped_emit(self, ev: ClusterEvent) -> None:
        if isinstance(ev, RankStateChanged):
            r = next((x for x in self.ranks if x.rank == ev.rank), None)
            if r is not None and r.state is RankState.FAILED:
                return  # a failed rank stays failed: removing it is not news
            if r is not None:
                r.state = ev.state
        self.emit(ev)

    # --- run ----------------------------------------------------------------------------

    async def run(self, *, wait_ready: bool = True, follow: bool = True) -> None:
        """Watch until: ready (when not `follow`), a failure (raises LaunchFailed), or cancel."""
        followers = [asyncio.create_task(self._follow(r)) for r in self.ranks]
        health = asyncio.create_task(self._wait_health()) if wait_ready else None
        ready_wait = asyncio.create_task(self.ready.wait())
        try:
            while True:
                ended = asyncio.create_task(self._ended.get())
                done, _ = await asyncio.wait(
                    {ended, ready_wait}, return_when=asyncio.FIRST_COMPLETED
                )
                if ended.done():  # (it may have finished just after the ready event)
                    r, why = ended.result()
                    if why.startswith(("lost", "gave up")):
                        raise self._lost(r, why)
                    raise await self._fail(r, why, followers)
                ended.cancel()
                if not follow:
                    return
                ready_wait = asyncio.create_task(asyncio.Event().wait())  # never again
        finally:
            for t in [*followers, ready_wait, *([health] if health else [])]:
                t.cancel()
            for r in self.ranks:
                if r.follower is not None:
                    r.follower.close()
            await asyncio.gather(*followers, return_exceptions=True)


# --- launch -------------------------------------------------------------------------------


async def find_stale(plan: LaunchPlan, dockers: Mapping[str, RemoteDocker]) -> list[StaleContainer]:
    """Containers of ours on the plan's nodes, and containers that hold a rank's name: one
    listing of each node's containers (one round trip over its SSH connection)."""
    found: list[StaleContainer] = []

    async def one(node: str, docker: RemoteDocker) -> None:
        names = {r.container.name for r in plan.ranks if r.node == node}
        for raw in await docker.containers_raw():
            labels = raw.get("Labels") or {}
            name = str((raw.get("Names") or ["?"])[0]).lstrip("/")
            if CLUSTER_LABEL not in labels:
                if name in names:  # not ours: never removed
                    state = str(raw.get("State") or "unknown")
                    found.append(StaleContainer(node, name, state, None, ours=False))
                continue
            if labels.get(ROLE_LABEL) == FLAG_TABLE_ROLE:
                continue  # an image's flag check under way (it removes its container)
            state = str(raw.get("State") or "unknown")
            found.append(StaleContainer(node, name, state, labels.get(CLUSTER_LABEL), ours=True))

    # Only the plan's nodes: a cluster of ours on other nodes is a service running beside
    # this one, not something this launch may remove.
    used = {r.node for r in plan.ranks}
    await asyncio.gather(*(one(n, d) for n, d in dockers.items() if n in used))
    return found


async def _node_images(
    plan: LaunchPlan, dockers: Mapping[str, RemoteDocker]
) -> dict[str, ImageInfo | None]:
    """The plan's image as each of its nodes has it (None: missing), asked at once."""
    nodes = list(dict.fromkeys(r.node for r in plan.ranks))
    image = plan.ranks[0].container.image
    found = await asyncio.gather(*(dockers[n].image(image) for n in nodes))
    return dict(zip(nodes, found, strict=True))


async def _ensure_images(
    plan: LaunchPlan,
    dockers: Mapping[str, RemoteDocker],
    emit: Emit[ClusterEvent],
    have: Mapping[str, ImageInfo | None],
) -> dict[str, str]:
    """The image on every node, `have` as the nodes said they hold it (pulled when missing,
    or when a resolved nightly's digest is not the node's); returns node -> digest (or id).
    Nodes that end with different images are named before any rank starts: every rank
    must run the same code."""
    from spark_tui.ops.images import needs_pull

    resolved = plan.image_resolved

    async def one(rank: RankSpec) -> tuple[str, ImageInfo]:
        docker, ref = dockers[rank.node], rank.container.image
        info = have.get(rank.node)
        if needs_pull(info, resolved):
            why = "missing" if info is None else "another digest"
            emit(Notice("info", f"{rank.node}: pulling {ref} ({why})"))

            def progress(line: str, node: str = rank.node) -> None:
                emit(Notice("info", f"{node}: {line}"))

            info = await docker.pull(ref, progress)
        assert info is not None
        return rank.node, info

    infos = dict(await asyncio.gather(*(one(r) for r in plan.ranks)))
    image = plan.ranks[0].container.image
    if resolved is not None:
        off = {n: i.digest for n, i in infos.items() if i.digest != resolved.digest}
        if off:
            node, digest = next(iter(off.items()))
            raise OperationFailed(
                f"{node} pulled {image} as {digest or 'an image with no registry digest'}, not "
                f"the registry's {resolved.digest}"
                + (f" (and {len(off) - 1} more node(s))" if len(off) > 1 else ""),
                f"check which registry {node} pulls from (its dockerd's mirrors), then launch again",
            )
    # Image IDs, not repo digests: a copy made with `docker save | docker load` has the
    # same ID as the pulled original but no repo digest.
    ids = {n: i.id for n, i in infos.items() if i.id}
    head = plan.ranks[0].node
    ref = ids.get(head) or next(iter(ids.values()), None)
    other = next((n for n, i in ids.items() if i != ref), None)
    if other is not None:
        raise OperationFailed(
            f"image {image} differs between nodes: {other} has {ids[other][:19]}, the head "
            f"{head} has {str(ref)[:19]}; no rank was started",
            "put the head's image on every node (`spark-tui images sync`), or pin the image "
            "by digest in the recipe, so every rank runs the same code",
        )
    return {n: d for n, i in infos.items() if (d := i.digest or i.id)}


async def _start_rank(
    r: WatchedRank,
    local_env: Mapping[str, str],
    emit: Emit[ClusterEvent],
    halt: asyncio.Event | None = None,
) -> None:
    """Create and start one rank's container; `halt` set: begin no further Docker call."""
    assert r.spec is not None
    spec = r.spec.container
    env = resolve_secrets(spec.env, local_env)
    # The command may carry `${NAME}` references: only to variables the container gets.
    resolved = _with_command(spec, resolve_argv(spec.command, env))
    if halt is not None and halt.is_set():
        return
    await r.docker.create(resolved, env)
    if spec.copies:  # the mods must be in the container before its entrypoint runs them
        await put_copies(r.docker, spec.name, spec.copies)
    r.state = RankState.CREATED
    emit(RankStateChanged(rank=r.rank, node=r.node, state=RankState.CREATED))
    if halt is not None and halt.is_set():
        return
    await r.docker.start(spec.name)
    r.state = RankState.STARTING
    emit(RankStateChanged(rank=r.rank, node=r.node, state=RankState.STARTING))


async def _remove_cluster(
    plan: LaunchPlan,
    pool: ConnectionPool,
    dockers: dict[str, RemoteDocker],
    emit: Emit[ClusterEvent],
) -> None:
    """Remove every container labelled with the plan's cluster id (an interrupted launch);
    what cannot be removed is named in an error Notice with the command that removes it."""
    try:
        report = await stop(pool, plan.cluster_id, emit=emit, dockers=dockers, stop_timeout=5)
    except SparkError as exc:
        emit(Notice("error", f"interrupted launch: {exc.message}", exc.remedy))
        return
    if report.removed:
        names = ", ".join(f"{c} on {n}" for n, c in report.removed)
        emit(Notice("info", f"interrupted launch: removed {names}"))


async def _all_of(*steps: Awaitable[Any]) -> tuple[Any, ...]:
    """Every step's result, run at once; the first failure is raised once all have ended
    (none is left running behind the launch's error)."""
    results = await asyncio.gather(*steps, return_exceptions=True)
    for res in results:
        if isinstance(res, BaseException):
            raise res
    return tuple(results)


def _with_command(spec: Any, command: list[str]) -> Any:
    from dataclasses import replace

    return replace(spec, command=command)


async def _make_dirs(r: WatchedRank) -> None:
    assert r.spec is not None
    dirs = sorted(r.spec.container.mounts)
    if not dirs:
        return
    res = await r.conn.run_argv(["mkdir", "-p", *dirs], timeout=30)
    if not res.ok:
        raise OperationFailed(
            f"{r.node}: could not create the mount folders: {res.stderr.strip()}",
            "check that the user owns its home folder on that node",
        )


def _ranks_for(
    plan: LaunchPlan, pool: ConnectionPool, dockers: Mapping[str, RemoteDocker]
) -> list[WatchedRank]:
    ranks = []
    for spec in plan.ranks:
        try:
            conn = pool[spec.node]
        except KeyError:
            raise InputError(
                f"the plan runs rank {spec.rank} on {spec.node}, which is not in the inventory",
                "plan and launch with the same --inventory / --hosts",
            ) from None
        ranks.append(
            WatchedRank(
                rank=spec.rank,
                node=spec.node,
                name=spec.container.name,
                serves_api=spec.serves_api,
                conn=conn,
                docker=dockers[spec.node],
                spec=spec,
            )
        )
    return ranks


async def launch(
    plan: LaunchPlan,
    pool: ConnectionPool,
    *,
    emit: Emit[ClusterEvent],
    keep_failed: bool = False,
    replace_stale: StaleConfirm | None = None,
    wait_ready: bool = True,
    follow: bool = True,
    ready_timeout: float = READY_TIMEOUT_S,
    api_host: str = "127.0.0.1",
    local_env: Mapping[str, str] | None = None,
    settle: float = 1.0,
    dockers: Mapping[str, RemoteDocker] | None = None,
) -> None:
    """Start the plan's ranks on the pool's (opened) nodes and watch them (see module doc),
    each event to `emit`; over `dockers` (every node's client, left open) when given.

    `replace_stale`: called with the stale containers; True removes them. None refuses
    with the remedy (`spark-tui stop`, or `--replace`). A container that is not ours but
    holds a rank's name is never removed. `wait_ready`: wait for /health through the
    forward and emit ClusterReady; `follow`: keep following logs and watching for
    failures after ready (until cancelled); without either it returns once every rank has
    started. Raises LaunchFailed when a rank fails.
    """
    env = dict(os.environ if local_env is None else local_env)
    own = await open_dockers(pool) if dockers is None else {}
    try:
        await _launch(
            plan,
            pool,
            dict(dockers) if dockers is not None else own,
            emit,
            env,
            keep_failed,
            replace_stale,
            wait_ready,
            follow,
            ready_timeout,
            api_host,
            settle,
        )
    finally:
        await close_dockers(own)


async def _launch(
    plan: LaunchPlan,
    pool: ConnectionPool,
    dockers: dict[str, RemoteDocker],
    emit: Emit[ClusterEvent],
    env: Mapping[str, str],
    keep_failed: bool,
    replace_stale: StaleConfirm | None,
    wait_ready: bool,
    follow: bool,
    ready_timeout: float,
    api_host: str,
    settle: float,
) -> None:
    ranks = _ranks_for(plan, pool, dockers)
    # The checks before any rank is made, at once: one round trip to each node rather than
    # one after another (a mount folder made before a refusal is harmless; nothing is
    # pulled or removed before the stale containers are decided on).
    stale, have, _dirs = await _all_of(
        find_stale(plan, dockers),
        _node_images(plan, dockers),
        asyncio.gather(*(_make_dirs(r) for r in ranks)),
    )
    clash = [s for s in stale if not s.ours]
    if clash:
        names = ", ".join(f"{s.name} on {s.node}" for s in clash)
        raise OperationFailed(
            f"a container that spark-tui did not start holds a rank's name: {names}",
            "remove or rename it yourself (`docker rm -f NAME` on that node)",
        )
    if stale:
        names = ", ".join(f"{s.name} on {s.node} ({s.state})" for s in stale)
        if replace_stale is None:
            raise OperationFailed(
                f"spark-tui containers from an earlier launch are still there: {names}",
                "stop them with `spark-tui stop`, or launch with --replace",
            )
        if not await replace_stale(stale):
            raise OperationFailed(
                f"launch cancelled: the earlier containers were kept ({names})",
                "stop them with `spark-tui stop` first",
            )
        emit(Notice("info", f"removing earlier containers: {names}"))
        await remove_ranks(dockers, [(s.node, s.name, -1) for s in stale], stop_timeout=5)

    digests = await _ensure_images(plan, dockers, emit, have)
    if plan.serve_exec is not None:  # vllm-ray: its ports must be free on the head
        from spark_tui.ops import ray as ray_ops

        await ray_ops.ports_free(plan, ranks[0])

    t0 = time.monotonic()
    started: list[WatchedRank] = []
    halt = asyncio.Event()

    async def start_all() -> None:
        head, workers = ranks[0], ranks[1:]
        await _start_rank(head, env, emit, halt)
        started.append(head)
        if plan.serve_exec is not None:  # vllm-ray: the workers join a Ray head that is up
            from spark_tui.ops import ray as ray_ops

            await ray_ops.wait_head(plan, head, emit, halt)
        results = await asyncio.gather(
            *(_start_rank(w, env, emit, halt) for w in workers), return_exceptions=True
        )
        for w, res in zip(workers, results, strict=True):
            if isinstance(res, BaseException):
                raise res
            started.append(w)

    async def ranks_first() -> None:
        # An image's flag check starting meanwhile would share the head with them.
        async with FlagTables.of(pool).ranks_first():
            await start_all()

    starting = asyncio.ensure_future(ranks_first())
    try:
        await asyncio.shield(starting)
    except asyncio.CancelledError:
        # Interrupted while starting: Docker calls already sent run on in threads and
        # cannot be recalled, so let them end (no new one begins), then remove every
        # container of this cluster: an interrupt never leaves a half-started cluster.
        halt.set()
        await asyncio.gather(starting, return_exceptions=True)
        await _remove_cluster(plan, pool, dockers, emit)
        raise
    except SparkError as exc:
        # Nothing half-started is left behind: remove what this launch created.
        targets = [(r.node, r.name, r.rank) for r in ranks]
        await remove_ranks(dockers, targets, emit=emit, stop_timeout=5)
        raise OperationFailed(
            f"launch failed while starting the ranks: {exc.message}", exc.remedy
        ) from exc
    elapsed = time.monotonic() - t0
    emit(
        ResultEvent(
            "launch",
            {
                "cluster_id": plan.cluster_id,
                "ranks_started": len(started),
                "start_seconds": round(elapsed, 3),
                "image_digests": digests,
            },
        )
    )
    emit(Notice("info", f"{len(started)} rank(s) started in {elapsed:.2f} s"))
    ray = plan.serve_exec is not None  # vllm-ray: the serve runs in the formed Ray cluster
    if not wait_ready and not follow and not ray:
        return
    watch = ClusterWatch(
        plan.cluster_id,
        ranks,
        emit,
        api_host=api_host,
        api_port=int(plan.endpoint.get("port") or 8000),
        keep_failed=keep_failed,
        ready_timeout=ready_timeout,
        settle=settle,
    )
    if ray:
        from spark_tui.ops import ray as ray_ops  # imports this module

        await ray_ops.form_and_watch(
            plan,
            watch,
            dockers,
            emit,
            env,
            keep_failed=keep_failed,
            wait_ready=wait_ready,
            follow=follow,
        )
        return
    await watch.run(wait_ready=wait_ready, follow=follow)


__all__ = [
    "ClusterWatch",
    "LaunchFailed",
    "StaleContainer",
    "WatchedRank",
    "exit_reason",
    "find_stale",
    "launch",
]

"""Watch a ready cluster: typed events from samplers that run side by side, each bounded.

Every `interval` seconds, independently of one another:
- a tiny request through the SSH forward (1 token of chat/completions, short timeout);
- the head's /metrics (running and waiting requests, KV cache use, tokens/s from counters);
- every node's memory and the traffic of its ranks' interfaces (`ops.link`: one command);
- the container of every rank.

A rank whose container is down, a 5xx answer, or a head that gives no token twice in a row
(real vLLM's /health stays 200 for a minute after its worker died, and a hung engine answers
/health too) ends the watch with a WatchAlert naming the rank that went first, its lines and,
after a worker's death, the head's. A node that does not answer is a NodeNotAnswering state,
retried every round, never a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from spark_tui.core.errors import NoClusterError, OperationFailed, SparkError
from spark_tui.core.timeouts import WATCH_INTERVAL_S, WATCH_REQUEST_TIMEOUT_S
from spark_tui.ops.attach import api_port_of, rank_argv
from spark_tui.ops.cluster import (
    CLUSTER_LABEL,
    ClusterStatus,
    RankStatus,
    close_dockers,
    open_dockers,
    several_clusters,
    status,
)
from spark_tui.ops.diagnose import (
    ClusterDiagnosis,
    RankFailure,
    cluster_cleanup,
    diagnose,
    rank_evidence,
)
from spark_tui.ops.events import (
    ContainerStates,
    Emit,
    LinkSample,
    NodeMemory,
    NodeNotAnswering,
    ProbeResult,
    RankContainer,
    ServiceGauges,
    WatchAlert,
    WatchSample,
    WatchStarted,
)
from spark_tui.ops.link import LinkSampler, open_sampler
from spark_tui.ops.prometheus import parse_prometheus, vllm_gauges
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.ssh import ConnectionPool

_COUNTERS = {
    "generation": "vllm:generation_tokens_total",
    "prompt": "vllm:prompt_tokens_total",
}
# Timeouts in a row (no token) before the head counts as hung: one can be a busy moment.
HUNG_AFTER = 2
# The tiny request's query (vLLM ignores it): its access-log line is known as ours.
PROBE_MARK = "spark-tui=watch"


def pick_watched(clusters: list[ClusterStatus], cluster_id: str | None) -> ClusterStatus:
    """The cluster to watch: the one named, or the only one on these nodes (running or not)."""
    if cluster_id is not None:
        for c in clusters:
            if c.cluster_id == cluster_id:
                return c
        raise OperationFailed(
            f"no spark-tui cluster {cluster_id!r} on these nodes",
            "list them with `spark-tui status`",
        )
    if not clusters:
        raise NoClusterError()
    running = [c for c in clusters if any(r.running for r in c.ranks)]
    candidates = running or clusters
    if len(candidates) > 1:
        raise several_clusters(candidates)
    return candidates[0]


def gauges_from(
    text: str, previous: tuple[float, dict[str, float]] | None, now: float
) -> tuple[ServiceGauges, dict[str, float]]:
    """ServiceGauges from a /metrics body, rates against the previous (time, counters)."""
    gauges = vllm_gauges(text)
    counters: dict[str, float] = {}
    for s in parse_prometheus(text):
        for key, name in _COUNTERS.items():
            if s.name == name:
                counters[key] = counters.get(key, 0.0) + s.value
    rates: dict[str, float | None] = {"generation": None, "prompt": None}
    if previous is not None:
        then, before = previous
        dt = now - then
        for key in rates:
            if dt > 0 and key in counters and key in before and counters[key] >= before[key]:
                rates[key] = (counters[key] - before[key]) / dt
    return (
        ServiceGauges(
            running=gauges.get("num_requests_running"),
            waiting=gauges.get("num_requests_waiting"),
            kv_cache_usage=gauges.get("kv_cache_usage_perc"),
            generation_tokens_per_s=rates["generation"],
            prompt_tokens_per_s=rates["prompt"],
        ),
        counters,
    )


class _Watch:
    """The samplers of one watched cluster, each sample to one `emit` until the first that
    is a failure (`failed` is set then, and later samples are dropped)."""

    def __init__(
        self,
        pool: ConnectionPool,
        dockers: dict[str, RemoteDocker],
        cluster: ClusterStatus,
        base_url: str,
        client: httpx.AsyncClient,
        emit: Emit[WatchSample],
        *,
        interval: float,
        request_timeout: float,
        link: LinkSampler,
    ) -> None:
        self.pool = pool
        self.link = link
        self.dockers = dockers
        self.cluster = cluster
        self.base_url = base_url
        self.client = client
        self.interval = interval
        self.request_timeout = request_timeout
        self._emit = emit
        self.failed = asyncio.Event()
        self.failure: WatchSample | None = None
        self._timeouts = 0  # tiny requests in a row that got no token in time
        self.model: str | None = cluster.model
        self.model_checked = False
        self.down_since: dict[str, float] = link.down_since
        self._metrics_prev: tuple[float, dict[str, float]] | None = None
        self.stopped = False

    # --- samplers ---------------------------------------------------------------------------

    async def _every(self, sample: Callable[[], Awaitable[None]]) -> None:
        me = asyncio.current_task()
        # A library below may swallow the cancel (it turns it into its own error): the loop
        # checks the stop flag and its own cancelling state, so stopping always ends it.
        while not self.stopped and not (me is not None and me.cancelling()):
            started = time.monotonic()
            # Each sampler reports its own node's trouble (NodeNotAnswering); anything else
            # it meets this round ends only this round, never the watch.
            with contextlib.suppress(SparkError):
                await sample()
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    def _headers(self) -> dict[str, str]:
        key = os.environ.get("VLLM_API_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def _served_model(self) -> str | None:
        """The id /v1/models serves (a recipe can rename it); the label's model otherwise."""
        if not self.model_checked:
            with contextlib.suppress(httpx.HTTPError, ValueError, TimeoutError, KeyError):
                resp = await asyncio.wait_for(
                    self.client.get(self.base_url + "/v1/models", headers=self._headers()),
                    self.request_timeout,
                )
                if resp.status_code == 200:
                    data = resp.json().get("data") or []
                    if data:
                        self.model = str(data[0]["id"])
                        self.model_checked = True
        return self.model

    async def probe(self) -> ProbeResult:
        """One chat/completions request for a single token, bounded by request_timeout."""
        started = time.monotonic()
        body: dict[str, Any] = {
            "model": await self._served_model() or "",
            "messages": [{"role": "user", "content": "ping"}],
            "max_tokens": 1,
        }
        try:
            resp = await asyncio.wait_for(
                self.client.post(
                    self.base_url + "/v1/chat/completions?" + PROBE_MARK,
                    json=body,
                    headers=self._headers(),
                ),
                self.request_timeout,
            )
        except (TimeoutError, httpx.TimeoutException):
            return ProbeResult(
                False,
                time.monotonic() - started,
                None,
                f"no token within {self.request_timeout:g} s",
                timed_out=True,
            )
        except httpx.HTTPError as exc:
            return ProbeResult(
                False, time.monotonic() - started, None, f"no answer: {type(exc).__name__}"
            )
        latency = time.monotonic() - started
        if resp.status_code == 200:
            return ProbeResult(True, latency, 200)
        return ProbeResult(False, latency, resp.status_code, _error_message(resp))

    def tell(self, sample: WatchSample) -> None:
        """Hand a sample on, unless a failure was seen already (the alert comes next)."""
        if self.failed.is_set():
            return
        self._emit(sample)
        if isinstance(sample, ProbeResult):
            self._timeouts = self._timeouts + 1 if sample.timed_out else 0
        if is_failure(sample, self._timeouts):
            self.failure = sample
            self.failed.set()

    async def _probe_once(self) -> None:
        self.tell(await self.probe())

    async def _metrics_once(self) -> None:
        try:
            resp = await asyncio.wait_for(
                self.client.get(self.base_url + "/metrics", headers=self._headers()),
                self.request_timeout,
            )
        except (TimeoutError, httpx.HTTPError):
            return  # the probe reports a head that does not answer
        if resp.status_code != 200:
            return
        now = time.monotonic()
        gauges, counters = gauges_from(resp.text, self._metrics_prev, now)
        self._metrics_prev = (now, counters)
        self.tell(gauges)

    def _unreachable(self, node: str, exc: BaseException) -> NodeNotAnswering:
        since = self.down_since.setdefault(node, time.monotonic())
        message = exc.message if isinstance(exc, SparkError) else f"no answer ({exc!r})"
        return NodeNotAnswering(node, round(time.monotonic() - since, 1), message)

    async def _memory_once(self) -> None:
        # One command per node reads its memory and its ranks' interface counters.
        for sample in await self.link.sample():
            if isinstance(sample, LinkSample):
                self.tell(NodeMemory(sample.node, sample.mem_total, sample.mem_available))
            self.tell(sample)

    async def containers(self) -> tuple[ContainerStates, list[NodeNotAnswering]]:
        """Every rank's container now; nodes that did not answer are not counted missing."""
        label = f"{CLUSTER_LABEL}={self.cluster.cluster_id}"
        nodes = [n for n in dict.fromkeys(self.cluster.nodes) if n in self.dockers]

        async def one(node: str) -> list[dict[str, Any]] | BaseException:
            try:
                return await asyncio.wait_for(
                    self.dockers[node].containers_raw([label]), self.request_timeout
                )
            except (SparkError, TimeoutError) as exc:
                return exc

        found = await asyncio.gather(*(one(n) for n in nodes))
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        down: list[NodeNotAnswering] = []
        answered: set[str] = set()
        for node, res in zip(nodes, found, strict=True):
            if isinstance(res, BaseException):
                down.append(self._unreachable(node, res))
                continue
            answered.add(node)
            self.down_since.pop(node, None)
            for raw in res:
                name = str((raw.get("Names") or ["?"])[0]).lstrip("/")
                seen[(node, name)] = raw
        ranks: list[RankContainer] = []
        missing: list[int] = []
        for rs in self.cluster.ranks:
            if rs.node not in answered:
                continue
            now = seen.get((rs.node, rs.container))
            if now is None:
                missing.append(rs.rank)
                continue
            ranks.append(
                RankContainer(
                    rs.rank,
                    rs.node,
                    rs.container,
                    str(now.get("State") or "unknown"),
                    str(now.get("Status") or ""),
                )
            )
        return ContainerStates(tuple(ranks), tuple(missing)), down

    async def _containers_once(self) -> None:
        states, down = await self.containers()
        for ev in down:
            self.tell(ev)
        self.tell(states)

    async def stop(self, tasks: list[asyncio.Task[None]]) -> None:
        """End the samplers; a sampler stuck in a thread is left behind, never waited on."""
        self.stopped = True
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.request_timeout)

    def start(self) -> list[asyncio.Task[None]]:
        return [
            asyncio.create_task(self._every(s))
            for s in (
                self._containers_once,
                self._probe_once,
                self._metrics_once,
                self._memory_once,
            )
        ]

    # --- failure ----------------------------------------------------------------------------

    async def alert(
        self, trigger: ProbeResult | None, settle: float, cleanup: str | None
    ) -> WatchAlert:
        """Settle, then diagnose: the first rank down, or the head when none is (a hung or
        erroring engine)."""
        head = self.cluster.ranks[0]
        states, _ = await self.containers()
        head_up = any(r.rank == head.rank and r.state == "running" for r in states.ranks)
        if trigger is None and head_up:
            # A head whose worker died answers /health until a request needs the engine: one
            # request makes it fail and log why (as real vLLM does), then its lines are there.
            await self.probe()
        await asyncio.sleep(settle)
        cluster = await self.refresh()
        try:
            # Logs over a slow link must not hold the alert back for long.
            diag = await asyncio.wait_for(
                diagnose(cluster, self.dockers, cleanup=cleanup), 3 * self.request_timeout
            )
        except TimeoutError:
            diag = _states_only(cluster, cleanup)
        if diag.first is not None:
            first = diag.first
            gone = [f for f in cluster.ranks if f.rank not in {x.rank for x in diag.failed}]
            others = tuple(f"rank {f.rank} on {f.node} {f.reason}" for f in diag.failed[1:])
            if trigger is not None and gone:
                others += (f"the head's API: {_probe_text(trigger)}",)
            return WatchAlert(
                first.rank,
                first.node,
                first.reason,
                first.lines,
                diag.head_lines,
                others,
                cleanup,
            )
        if not any(r.rank == head.rank for r in cluster.ranks):
            return WatchAlert(
                head.rank,
                head.node,
                "its container disappeared (removed from outside spark-tui)",
                cleanup=cleanup,
            )
        try:
            _info, lines = await asyncio.wait_for(
                rank_evidence(self.dockers[head.node], head), 3 * self.request_timeout
            )
        except (TimeoutError, SparkError):
            lines = ()
        reason = "its API " + (_probe_text(trigger) if trigger else "failed")
        if trigger is not None and trigger.status is None:
            health = await self._health()
            if health == 200:
                reason = f"is hung: /health answers 200 but {trigger.error}"
        return WatchAlert(head.rank, head.node, reason, lines, (), (), cleanup)

    async def refresh(self) -> ClusterStatus:
        """The watched ranks as Docker's inspect sees them now (a removed one is left out;
        one on a node that does not answer keeps its last known state)."""

        async def one(rs: RankStatus) -> RankStatus | None:
            try:
                info = await asyncio.wait_for(
                    self.dockers[rs.node].inspect(rs.container), self.request_timeout
                )
            except (SparkError, TimeoutError):
                return rs
            if info is None:
                return None
            st = info.get("State") or {}
            state = str(st.get("Status") or ("running" if st.get("Running") else "exited"))
            text = rs.status if state == "running" else f"Exited ({st.get('ExitCode')})"
            return dataclasses.replace(rs, state=state, status=text)

        found = await asyncio.gather(*(one(r) for r in self.cluster.ranks))
        ranks = [r for r in found if r is not None]
        return dataclasses.replace(self.cluster, ranks=ranks)

    async def _health(self) -> int | None:
        try:
            resp = await asyncio.wait_for(
                self.client.get(self.base_url + "/health"), self.request_timeout
            )
        except (TimeoutError, httpx.HTTPError):
            return None
        return resp.status_code


def _states_only(cluster: ClusterStatus, cleanup: str | None) -> ClusterDiagnosis:
    """A diagnosis from the container states alone (the logs could not be read in time)."""
    down = [
        RankFailure(r.rank, r.node, r.container, f"is down ({r.status or r.state})")
        for r in cluster.ranks
        if not r.running
    ]
    return ClusterDiagnosis(cluster.cluster_id, "failed" if down else "running", down, (), cleanup)


def _error_message(resp: httpx.Response) -> str:
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        data = resp.json()
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(data, dict) and data.get("message"):
            return str(data["message"])
    return resp.text.strip()[:200] or resp.reason_phrase


def _probe_text(p: ProbeResult) -> str:
    if p.status is None:
        return p.error or "no answer"
    return f"answered {p.status}: {p.error}"


def is_failure(ev: WatchSample, timeouts: int) -> bool:
    """Whether this event (with `timeouts` probe timeouts in a row so far) means failed."""
    if isinstance(ev, ContainerStates):
        return bool(ev.missing) or any(r.state != "running" for r in ev.ranks)
    if isinstance(ev, ProbeResult) and not ev.ok:
        if ev.status is not None:
            return ev.status >= 500
        return ev.timed_out and timeouts >= HUNG_AFTER
    return False


async def watch(
    pool: ConnectionPool,
    cluster_id: str | None = None,
    *,
    interval: float = WATCH_INTERVAL_S,
    request_timeout: float = WATCH_REQUEST_TIMEOUT_S,
    settle: float = 2.0,
    cleanup: str | None = None,
    api_host: str = "127.0.0.1",
    transport: httpx.AsyncBaseTransport | None = None,
    emit: Emit[WatchSample],
) -> None:
    """Watch our cluster on the pool's (opened) nodes, each sample to `emit`, until it fails
    (a WatchAlert, then it returns) or it is cancelled. `transport` replaces the HTTP
    transport (tests). Raises OperationFailed when there is no cluster to watch."""
    dockers = await open_dockers(pool)
    tasks: list[asyncio.Task[None]] = []
    w: _Watch | None = None
    client = httpx.AsyncClient(timeout=request_timeout, transport=transport)
    try:
        cluster = pick_watched(await status(pool, cluster_id, dockers=dockers), cluster_id)
        cleanup = cluster_cleanup(cleanup, cluster.cluster_id)
        head = cluster.ranks[0]
        if not cluster.running:
            diag = await diagnose(cluster, dockers, cleanup=cleanup)
            first = diag.first
            if first is not None:
                emit(
                    WatchAlert(
                        first.rank,
                        first.node,
                        first.reason,
                        first.lines,
                        diag.head_lines,
                        tuple(f"rank {f.rank} on {f.node} {f.reason}" for f in diag.failed[1:]),
                        cleanup,
                    )
                )
                return
            raise OperationFailed(
                f"cluster {cluster.cluster_id} is stopped (no rank runs)",
                f"remove it with `{cleanup or 'spark-tui stop'}`, then launch again",
            )
        argv = await rank_argv(dockers[head.node], head.container)
        port = await pool[head.node].forward_local_port(api_host, api_port_of(argv))
        base = f"http://127.0.0.1:{port}"
        link = await open_sampler(pool, cluster, dockers, timeout=request_timeout)
        w = _Watch(
            pool,
            dockers,
            cluster,
            base,
            client,
            emit,
            interval=interval,
            request_timeout=request_timeout,
            link=link,
        )
        emit(WatchStarted(cluster.cluster_id, cluster.recipe, tuple(cluster.nodes), base))
        tasks = w.start()
        await w.failed.wait()
        await w.stop(tasks)
        trigger = w.failure if isinstance(w.failure, ProbeResult) else None
        emit(await w.alert(trigger, settle, cleanup))
    finally:
        if w is not None:
            await w.stop(tasks)
        await client.aclose()
        await close_dockers(dockers)

"""The Ray part of a vllm-ray launch, run after every rank's container has started.

The containers run `ray start` (the head with `--head`, the workers joining the head's
ConnectX address), as NVIDIA's playbook does with `run_cluster.sh`. Then:
- form: `ray status` is run in the head container (docker exec) until every node of the
  plan is active; each change is a `RayClusterState` event (nodes joined, resources);
- serve: `vllm serve ... --distributed-executor-backend ray` is exec'd in the head
  container, its output sent to the container's own stdout and stderr so it is in the
  head's log like any rank's (streamed, classified, kept by `attach`). When it exits, the
  Ray head is stopped, so the head container ends and the launch's watch sees a failed rank
  exactly as for native multi-node (its lines explain why);
- the usual `ClusterWatch` follows every container meanwhile: a Ray worker that dies fails
  the launch and the other ranks are removed.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from spark_tui.core import logclass
from spark_tui.core.errors import OperationFailed, SparkError
from spark_tui.core.plan import LaunchPlan, resolve_argv
from spark_tui.core.ray_status import RayStatus, listening_ports, parse_ray_status
from spark_tui.ops.cluster import remove_ranks
from spark_tui.ops.events import (
    ClusterEvent,
    Emit,
    Notice,
    RankState,
    RankStateChanged,
    RayClusterState,
)
from spark_tui.ops.launch import ClusterWatch, LaunchFailed, WatchedRank, exit_reason

# The line the exec'd serve writes when it ends: the head's log then says what happened.
SERVE_EXIT_MARK = "spark-tui: vllm serve exited with code"
# What `ray start` prints once its node is up (head and workers alike).
RAY_STARTED = "Ray runtime started"
DEFAULT_FORM_TIMEOUT = 600.0


def ray_address(plan: LaunchPlan) -> str:
    """The head's GCS address (ConnectX IPv4 and Ray port) of a vllm-ray plan."""
    return str(plan.rendezvous["ray_address"])


def status_argv(plan: LaunchPlan) -> list[str]:
    """`ray status` against the plan's head, as run in the head container."""
    return ["ray", "status", "--address", ray_address(plan)]


def serve_script(serve_argv: list[str]) -> str:
    """The shell script exec'd in the head container: serve into the container's own log.

    Every argument is quoted. When serve ends, its exit code is written to the log and the
    Ray head is stopped, which ends the container (`ray start --block` returns).
    """
    serve = " ".join(shlex.quote(a) for a in serve_argv)
    return (
        f"{serve} >/proc/1/fd/1 2>/proc/1/fd/2; code=$?; "
        f'echo "{SERVE_EXIT_MARK} $code; stopping the Ray head" >/proc/1/fd/2; '
        "ray stop --force >/dev/null 2>&1; kill -TERM 1"
    )


async def _exec(head: WatchedRank, argv: list[str], *, detach: bool = False) -> tuple[int, str]:
    """Run argv in the head's container: (exit code, output); (0, "") when detached."""

    def run(c: Any) -> tuple[int, str]:
        res = c.containers.get(head.name).exec_run(argv, detach=detach)
        if detach:
            return 0, ""
        out = res.output or b""
        return int(res.exit_code or 0), out.decode("utf-8", "replace")

    result: tuple[int, str] = await head.docker.call(run, f"docker exec in {head.name}")
    return result


async def wait_formed(
    plan: LaunchPlan,
    head: WatchedRank,
    emit: Emit[ClusterEvent],
    *,
    timeout: float = DEFAULT_FORM_TIMEOUT,
    poll: float = 1.0,
    until: int | None = None,
    halt: asyncio.Event | None = None,
    gate: Callable[[], Awaitable[bool]] | None = None,
) -> RayStatus:
    """Poll `ray status` in the head container until every node of the plan is active
    (or `until` nodes: 1 waits for the head alone, before the workers start).

    `ray status` is a whole Ray client (seconds of CPU): while `gate` says no (the nodes'
    logs do not show "Ray runtime started" yet) it is not run, so the polling never slows
    the Ray startup it waits for (Ray gives a raylet 30 s to register).
    """
    expected = len(plan.ranks)
    need = expected if until is None else until
    deadline = time.monotonic() + timeout
    last: tuple[int, tuple[tuple[str, float], ...]] | None = None
    status = RayStatus()
    output = ""
    while True:
        if halt is not None and halt.is_set():  # interrupted: the launch removes the ranks
            raise OperationFailed("interrupted while the Ray head started", "launch again")
        try:
            if gate is not None and not await gate():
                code = 1
                info = await head.docker.inspect(head.name)
                if info is None or ((info.get("State") or {}).get("Status") in ("exited", "dead")):
                    raise SparkError("the Ray head ended", "")
            else:
                code, output = await _exec(head, status_argv(plan))
        except SparkError:
            code = -1  # the container is starting, or gone:
            info = await head.docker.inspect(head.name)
            state = (info or {}).get("State") or {}
            if info is None or state.get("Status") in ("exited", "dead"):
                said = list(head.lines)
                if not said and info is not None:  # not watched yet: read its log
                    said = [rec.text for rec in await head.docker.logs(head.name, tail=40)]
                why = logclass.explain_failure(said) or [t for t in said if t.strip()][-5:]
                raise LaunchFailed(
                    f"the Ray head on {head.node} {exit_reason(state) if info else 'is gone'}",
                    "read the Ray head's log (`spark-tui logs`), fix the cause and launch again",
                    rank=head.rank,
                    node=head.node,
                    lines=tuple(why),
                ) from None
        if code == 0:
            status = parse_ray_status(output)
            key = (status.active, tuple(sorted(status.resources.items())))
            formed = status.active >= expected
            if key != last or formed or status.active >= need:
                last = key
                emit(
                    RayClusterState(
                        cluster_id=plan.cluster_id,
                        nodes_joined=status.active,
                        nodes_expected=expected,
                        resources=dict(status.resources),
                        formed=formed,
                    )
                )
            if status.active >= need:
                return status
        if time.monotonic() > deadline:
            lines = tuple(ln for ln in output.splitlines() if ln.strip())[-12:]
            raise LaunchFailed(
                f"the Ray cluster did not form within {timeout:g} s: "
                f"{status.active} of {expected} node(s) joined {ray_address(plan)}",
                "check that every worker reaches the head's ConnectX address and Ray port "
                "(firewall, cabling, `ray_port`), and read the Ray workers' logs",
                rank=head.rank,
                node=head.node,
                lines=lines,
            )
        await asyncio.sleep(poll)


async def ports_free(plan: LaunchPlan, head: WatchedRank) -> None:
    """Refuse to start when the Ray port (or the dashboard's) is taken on the head node."""
    wanted = {int(ray_address(plan).rsplit(":", 1)[1]): "the Ray GCS port (ray_port)"}
    if plan.rendezvous.get("dashboard_port"):
        wanted[int(plan.rendezvous["dashboard_port"])] = "the Ray dashboard port (dashboard_port)"
    res = await head.conn.run_argv(["cat", "/proc/net/tcp", "/proc/net/tcp6"], timeout=30)
    taken = listening_ports(res.stdout)
    for port, what in wanted.items():
        if port in taken:
            setting = what.rsplit("(", 1)[1].rstrip(")")
            raise OperationFailed(
                f"{head.node}: port {port}, {what}, is already in use",
                f"stop what listens there (`ss -ltnp 'sport = :{port}'` on {head.node}), "
                f"or --set {setting}=N",
            )


async def wait_head(
    plan: LaunchPlan,
    head: WatchedRank,
    emit: Emit[ClusterEvent],
    halt: asyncio.Event | None = None,
    timeout: float = 300.0,
) -> None:
    """Wait until the Ray head's node is in its GCS: a worker that asks earlier is refused
    (real Ray: "No node info found for head node in GCS") and exits."""

    async def head_started() -> bool:
        return any(RAY_STARTED in rec.text for rec in await head.docker.logs(head.name, tail=200))

    await wait_formed(
        plan, head, emit, timeout=timeout, until=1, halt=halt, gate=head_started, poll=2.0
    )


def _gpu_notice(plan: LaunchPlan, status: RayStatus) -> Notice | None:
    world = plan.tensor_parallel * plan.pipeline_parallel
    gpus = status.resources.get("GPU", 0.0)
    if gpus >= world:
        return None
    return Notice(
        "warning",
        f"the Ray cluster shows {gpus:g} GPU(s) for TP {plan.tensor_parallel} x "
        f"PP {plan.pipeline_parallel} = {world}: vLLM's Ray executor needs one per rank",
        "run the containers with the GPUs (`--gpus all`) on every node",
    )


async def start_serve(plan: LaunchPlan, head: WatchedRank, local_env: Mapping[str, str]) -> None:
    """Exec the plan's serve command in the head container (secrets resolved, never logged)."""
    assert plan.serve_exec is not None
    argv = resolve_argv(list(plan.serve_exec), local_env)
    await _exec(head, ["sh", "-c", serve_script(argv)], detach=True)


def worker_ray_lines(ranks: list[WatchedRank], per_rank: int = 3) -> tuple[str, ...]:
    """The last lines of each rank that name a Ray cause (`ray_*`), prefixed by the node."""
    out: list[str] = []
    for r in ranks:
        hits = [t for t in r.lines if (logclass.classify(t).detail or "").startswith("ray_")]
        out += [f"{r.node}: {t}" for t in hits[-per_rank:]]
    return tuple(out)


async def form_and_watch(
    plan: LaunchPlan,
    watch: ClusterWatch,
    dockers: Mapping[str, Any],
    emit: Emit[ClusterEvent],
    local_env: Mapping[str, str],
    *,
    keep_failed: bool,
    wait_ready: bool,
    follow: bool,
    form_timeout: float = DEFAULT_FORM_TIMEOUT,
    poll: float = 2.0,
) -> None:
    """Form the Ray cluster and start serve while `watch` follows every container.

    A rank that dies while the cluster forms fails the launch through the watch; a cluster
    that never forms fails it here (the ranks removed unless `keep_failed`).
    """
    head = watch.ranks[0]

    async def all_started() -> bool:
        return all(any(RAY_STARTED in t for t in r.lines) for r in watch.ranks)

    async def form() -> None:
        try:
            status = await wait_formed(
                plan, head, emit, timeout=form_timeout, poll=poll, gate=all_started
            )
        except LaunchFailed as exc:
            # The workers' own Ray lines (GCS unreachable, ...) say why they did not join.
            said = worker_ray_lines(watch.ranks[1:])
            if said:
                raise LaunchFailed(
                    exc.message, exc.remedy, rank=exc.rank, node=exc.node, lines=said
                ) from None
            raise
        notice = _gpu_notice(plan, status)
        if notice is not None:
            emit(notice)
        emit(Notice("info", f"Ray cluster formed ({status.active} nodes); starting vllm serve"))
        await start_serve(plan, head, local_env)

    if not (wait_ready or follow):
        await form()  # nobody watches: the serve must still be started
        return
    run_task = asyncio.create_task(watch.run(wait_ready=wait_ready, follow=follow))
    form_task = asyncio.create_task(form())
    try:
        done, _ = await asyncio.wait({run_task, form_task}, return_when=asyncio.FIRST_COMPLETED)
        if run_task in done:
            run_task.result()  # a failed rank: LaunchFailed from the watch
            return
        exc = form_task.exception()
        if exc is None:
            await run_task
            return
        if isinstance(exc, LaunchFailed):
            run_task.cancel()
            await asyncio.gather(run_task, return_exceptions=True)
            emit(
                RankStateChanged(
                    rank=head.rank,
                    node=head.node,
                    state=RankState.FAILED,
                    reason=exc.message,
                    explaining_lines=exc.lines,
                )
            )
            if not keep_failed:
                targets = [(r.node, r.name, r.rank) for r in watch.ranks]
                await remove_ranks(dict(dockers), targets, emit=emit, stop_timeout=5)
        raise exc
    finally:
        for t in (run_task, form_task):
            t.cancel()
        await asyncio.gather(run_task, form_task, return_exceptions=True)


__all__ = [
    "DEFAULT_FORM_TIMEOUT",
    "SERVE_EXIT_MARK",
    "form_and_watch",
    "ray_address",
    "serve_script",
    "start_serve",
    "status_argv",
    "wait_formed",
]

"""The launch action: replace a running cluster of ours (asked), probe, evaluate, refuse a
launch the fit check says no to (asked), start every rank, follow them to ready and record
the launch in the history (with its image digests and model revision, failed or not)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import LaunchFailed, OperationFailed, SparkError, UnreachableError
from spark_tui.core.timeouts import READY_TIMEOUT_S
from spark_tui.service import events as ev
from spark_tui.service.cluster import Cluster
from spark_tui.service.discover import discover
from spark_tui.service.evaluate import Evaluation, add_findings
from spark_tui.service.image_flags import PENDING
from spark_tui.service.images import refuse_unresolved
from spark_tui.service.stop import stop_all
from spark_tui.service.watch import settled

# How long a launch interrupted before its cluster was up waits for the stop of what it
# started (the Docker stops' own timeouts bound it well below this).
STOP_ON_CANCEL_WAIT = 60.0

__all__ = ["LaunchFailed", "LaunchOptions", "launch", "launched_until_ready"]

if TYPE_CHECKING:
    from spark_tui.core.fit import Finding
    from spark_tui.core.recipe import Recipe
    from spark_tui.ops.history import Run
    from spark_tui.ops.launch import StaleContainer
    from spark_tui.service.pump import Ask, Emit
    from spark_tui.service.session import Session


@dataclass(frozen=True)
class LaunchOptions:
    """How a launch goes: `insist` / `replace` answer their questions up front (None: ask),
    `wait_ready` follows the ranks to ready, `follow` on after it (until the consumer
    stops), `keep_failed` leaves the other ranks when one fails (for inspection)."""

    insist: bool | None = None
    replace: bool | None = None
    wait_ready: bool = True
    follow: bool = True
    keep_failed: bool = False
    ready_timeout: float = READY_TIMEOUT_S
    record: bool = True


def alert_of(failed: Sequence[ev.RankStateChanged], head: int) -> ev.WatchAlert:
    """The alert of ranks that failed after ready, the one that went first leading."""
    first = failed[0]
    heads = [f for f in failed if f.rank == head and f is not first]
    return ev.WatchAlert(
        first.rank,
        first.node,
        first.reason or "failed",
        tuple(first.explaining_lines),
        tuple(heads[0].explaining_lines) if heads else (),
        tuple(f"rank {f.rank} on {f.node} {f.reason or 'failed'}" for f in failed[1:]),
    )


async def launch(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    ask: Ask,
    recipe: Recipe,
    overrides: dict[str, Any],
    options: LaunchOptions,
    on_ready: Callable[[Cluster], None] | None = None,
) -> Cluster:
    """The launch action (see module doc); `on_ready` is called once the API answers.
    Raises LaunchFailed when a rank fails."""
    # The launch's code loads in a thread while the nodes are reached, probed and the fit
    # evaluated (a headless launch; the cockpit loaded it while the user chose): imported
    # only once the ranks are to start, it took up to a fifth of a second on a busy machine
    # before the head's container was made.
    from spark_tui.service.session import LAUNCH_CODE

    loading = asyncio.ensure_future(session.load_launch(LAUNCH_CODE))
    held = HelpHeld()
    try:
        cluster = await _launch(
            session, emit, ask, recipe, overrides, options, on_ready, loading, held
        )
    finally:
        held.release()  # refused, failed or interrupted before its ranks started too
        if not loading.done():
            await asyncio.wait({loading})  # (a thread's imports cannot be recalled)
        _dropped(loading)
    return cluster


class HelpHeld:
    """The image's flag check held by a launch (`Nodes.hold_flag_tables`): its help
    container does not start before the ranks have. On a head that had made no container
    of the image yet, a help container started first made the head's start wait in
    dockerd, and its imports took both cores of a small head."""

    def __init__(self) -> None:
        self._release: Callable[[], None] | None = None

    def hold(self, session: Session) -> None:
        self.release()
        self._release = session.nodes.hold_flag_tables()

    def release(self) -> None:
        """Let the help runs start (once the ranks have, or the launch ended before)."""
        release, self._release = self._release, None
        if release is not None:
            release()


async def _launch(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    ask: Ask,
    recipe: Recipe,
    overrides: dict[str, Any],
    options: LaunchOptions,
    on_ready: Callable[[Cluster], None] | None,
    loading: asyncio.Future[None],
    held: HelpHeld,
) -> Cluster:
    from spark_tui.service.history import recipe_defaults

    await session.connect(strict=True)
    held.hold(session)  # before the flag table build begins (the cockpit's may have begun)
    session.start_flag_table(recipe)  # while the nodes are probed and the fit evaluated
    # The verdict `check` and the fit panel give (model facts from the Hub when no node
    # has them, our running cluster's memory counted free, gaps, the image's flag check
    # of every rank), before the running cluster is replaced: a launch refused leaves it
    # alone. An image not on the head yet is checked after the fit question. A first launch
    # of an image does not wait for its flag table (the image's `vllm serve --help=all`,
    # tens of seconds of imports): the check is noted pending and the ranks start beside
    # it, its container being this cluster's (see _follow).
    evaluation = await vetted(session, emit, ask, recipe, overrides, options.insist)
    nodes = session.nodes
    plan = evaluation.plan
    assert plan is not None
    nodes_used = [r.node for r in plan.ranks]
    if await replace_running(session, emit, ask, options.replace, nodes_used, plan.cluster_id):
        await discover(session, emit)  # the nodes as the launch finds them
        # A flag table build the replacement gave up (see replace_running) starts again;
        # one under way or kept goes on as it was.
        session.start_flag_table(recipe, overrides)
    report = evaluation.report
    if report is not None and any(f.code == "image_not_pulled" for f in report.findings):
        report.findings = [f for f in report.findings if f.code != "image_not_pulled"]
        add_findings(evaluation, await nodes.image_flags(plan, pull=True, emit=emit, wait=False))
        refuse_flags(recipe, evaluation)
    cluster = Cluster(
        plan.cluster_id,
        recipe.name,
        overrides=dict(overrides),
        defaults=recipe_defaults(recipe),
        ranks=[(r.rank, r.node) for r in plan.ranks],
        head_argv=list(plan.head.argv),
        plan=plan,
    )
    session.cluster = cluster
    if session.chosen is not None:
        session.chosen = cluster.cluster_id  # the actions after it act on this one
    cluster.endpoint = session.endpoint(plan.cluster_id, plan.head.node, cluster.api_port)
    emit(cluster.endpoint)

    async def replace_stale(stale: list[StaleContainer]) -> bool:
        if options.replace:
            return True
        names = ", ".join(f"{s.name} on {s.node}" for s in stale)
        return await ask(
            ev.Question(
                ev.REPLACE_STALE,
                "Stale containers",
                f"Containers of an earlier spark-tui run hold the ranks' names: {names}.\n"
                "Remove them and launch?",
                default=False,
                yes_label="Remove and launch",
                data={"containers": [s.name for s in stale]},
            )
        )

    pending = report is not None and any(f.code == PENDING for f in report.findings)
    await loading
    await _follow(
        session, emit, cluster, replace_stale, options, on_ready, pending=pending, held=held
    )
    return cluster


async def vetted(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    ask: Ask,
    recipe: Recipe,
    overrides: dict[str, Any],
    insisting: bool | None = None,
) -> Evaluation:
    """The checks a launch makes before it touches a container, on the nodes as they are
    now: the evaluation (said as Evaluated) with a plan, or the refusal raised. `insisting`
    answers "launch anyway?" up front (None: ask; False: refused without a question)."""
    if not session.facts_fresh():
        # (The cockpit's launch acts on the facts of its last refresh, which its fit panel
        # shows, when nothing changed on the nodes since.)
        await discover(session, emit)
    await session.prepare(recipe, overrides, retry=True, emit=emit, wait_flags=False)
    evaluation = session.evaluate(recipe, overrides)
    emit(ev.Evaluated(evaluation))
    if evaluation.problem is not None:
        raise evaluation.problem
    if evaluation.plan is None:
        raise OperationFailed(
            "no reachable node to launch on", "check the nodes (`spark-tui probe`)"
        )
    refuse_flags(recipe, evaluation)
    refuse_unresolved(evaluation.report.findings if evaluation.report else [])
    if evaluation.needs_insisting() and not insisting:
        # insisting=False (a sweep): refused without a question nobody is there to answer.
        await insist(ask if insisting is None else None, recipe, evaluation)
    return evaluation


@contextlib.asynccontextmanager
async def launched_until_ready(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    ask: Ask,
    recipe: Recipe,
    overrides: dict[str, Any],
    options: LaunchOptions,
    what: str,
) -> AsyncIterator[tuple[Cluster, asyncio.Task[Cluster]]]:
    """A launch run until its cluster is ready: the cluster and the launch's task (which
    follows the ranks on when `options.follow`). The launch's own error when it fails
    first; on leaving, a launch that does not follow is ended, and so is one that does
    when left by an error or an interrupt."""
    ready = asyncio.Event()
    launching = asyncio.create_task(
        launch(session, emit, ask, recipe, overrides, options, on_ready=lambda _c: ready.set())
    )
    waiter = asyncio.create_task(ready.wait())
    # A following launch left behind by an interrupt went on, and removed by cluster id
    # what the next launch of the same cluster started (a tune's settings brought back).
    left_well = False
    try:
        await asyncio.wait({launching, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            launching.result()  # raises why the launch failed
            raise OperationFailed(
                f"{what} ended before it was ready", "read the ranks' logs (`spark-tui logs`)"
            )
        cluster = session.cluster
        if cluster is None:
            raise OperationFailed(
                f"the cluster of {what} is gone", "read the ranks' logs (`spark-tui logs`)"
            )
        yield cluster, launching
        left_well = True
    finally:
        waiter.cancel()
        if not launching.done() and not (options.follow and left_well):
            launching.cancel()
            with contextlib.suppress(asyncio.CancelledError, SparkError):
                await launching


async def _follow(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    cluster: Cluster,
    replace_stale: Any,
    options: LaunchOptions,
    on_ready: Callable[[Cluster], None] | None,
    *,
    pending: bool = False,
    held: HelpHeld | None = None,
) -> None:
    """Start the ranks and pass their events on, keeping the cluster's state and record;
    once they have started, `held` is released and the code a launch needs once ready
    (the API's client, the history's records) loads in a thread while vLLM starts.

    `pending`: the image's flag check is under way, in a container of this cluster: the
    ranks start beside it, and a flag it then refuses stops and removes them and refuses
    the launch in the words the check before the launch gives (a rank that failed first,
    as vLLM's argparse makes it, waits for that answer). A launch that fails or is
    interrupted removes the check's container with its ranks."""
    from spark_tui.service.history import RankTails

    plan = cluster.plan
    assert plan is not None
    digests: dict[str, str] = {}
    started = False
    failed: list[ev.RankStateChanged] = []
    tails = RankTails()
    loading: asyncio.Future[None] | None = None

    def followed(event: ev.ClusterEvent) -> None:
        nonlocal started, digests, loading
        tails.see(event)
        if isinstance(event, ev.RankStateChanged) and event.state is ev.RankState.CREATED:
            started = True
        if isinstance(event, ev.RankStateChanged) and event.state is ev.RankState.FAILED:
            failed.append(event)
        if isinstance(event, ev.ResultEvent) and event.kind == "launch":
            # Every rank has started.
            digests = dict(event.payload.get("image_digests") or {})
            if held is not None:
                held.release()
            if loading is None:
                from spark_tui.service.session import READY_CODE

                loading = asyncio.ensure_future(session.load_launch(READY_CODE))
            return
        if isinstance(event, ev.ClusterReady):
            cluster.base_url = event.base_url
            cluster.ready = True
            cluster.endpoint = session.endpoint(plan.cluster_id, plan.head.node, cluster.api_port)
            if options.record:
                cluster.launch_run = record_launch(session, emit, cluster, digests, True)
            emit(event)
            emit(cluster.endpoint)
            if on_ready is not None:
                on_ready(cluster)
            return
        emit(event)

    cluster.followed = True
    session.nodes_changed()
    launching = asyncio.ensure_future(
        session.nodes.launch(
            plan,
            replace_stale,
            keep_failed=options.keep_failed,
            wait_ready=options.wait_ready,
            follow=options.follow,
            ready_timeout=options.ready_timeout,
            emit=followed,
        )
    )
    check: asyncio.Future[list[Finding]] | None = None
    if pending:
        check = asyncio.ensure_future(session.nodes.image_flags(plan, pull=False, emit=None))
    ended_well = False
    try:
        await _beside_check(session, emit, launching, check, cluster)
        ended_well = True
    except LaunchFailed as exc:
        if check is not None and not cluster.ready:
            # vLLM's argparse refuses an unknown flag at once (exit 2): the table's answer
            # says it in the check's own words.
            refused = await _flags_refused(session, check, cluster)
            if refused is not None:
                cluster.failed = True
                with contextlib.suppress(SparkError):
                    await session.nodes.stop(plan.cluster_id, emit)
                raise refused from None
        cluster.failed = True
        cluster.unwatched = options.keep_failed  # the other ranks were left for inspection
        if cluster.ready and failed:
            # Failed while serving: the same alert a watch gives (the rank that went
            # first, its lines, the head's when a worker went first).
            emit(alert_of(failed, plan.head.rank))
        if options.record and cluster.launch_run is None:
            cluster.launch_run = record_launch(session, emit, cluster, digests, False)
        elif options.record and cluster.launch_run is not None:
            # It was ready, then a rank failed: the same run, now failed.
            run = cluster.launch_run
            run.ok = False
            run.notes.append(f"failed after it was ready: {exc.message}")
            with contextlib.suppress(OSError):
                cluster.launch_run = session.history.save(run)
        tails.keep(session.history, cluster.launch_run, exc.message)
        if started and not options.keep_failed:  # kept: the launch has said so
            emit(settled(cluster.cluster_id, cluster.launch_run, options.keep_failed))
        raise
    except asyncio.CancelledError:
        # Interrupted before the cluster was up: remove what this launch started (unless
        # a stop of it came first: that stop forgot it).
        stopped = session.cluster is not cluster
        if started and not cluster.ready and not session.keep_on_cancel and not stopped:
            cluster.failed = True
            # Finished before this launch ends, even when cancelled again meanwhile: a stop
            # left running by cluster id would remove what the next launch of the same
            # cluster (a sweep's "leave the best running") starts.
            stopping = asyncio.ensure_future(session.nodes.stop(plan.cluster_id, None))
            deadline = time.monotonic() + STOP_ON_CANCEL_WAIT
            while not stopping.done() and time.monotonic() < deadline:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({stopping}, timeout=deadline - time.monotonic())
            if stopping.done() and not stopping.cancelled():
                with contextlib.suppress(SparkError):
                    stopping.result()
        raise
    except SparkError as exc:
        cluster.failed = True
        # A watch that lost a node leaves the ranks as they are (they may run on).
        cluster.unwatched = started and isinstance(exc, UnreachableError)
        raise
    finally:
        cluster.followed = False
        if loading is not None:
            if not loading.done():
                await asyncio.wait({loading})  # (a thread's imports cannot be recalled)
            _dropped(loading)
        if check is not None:
            check.cancel()
            check.add_done_callback(_dropped)
        if not ended_well:
            # The flag check's container goes with the ranks, however the launch ended.
            with contextlib.suppress(SparkError):
                await asyncio.shield(session.nodes.abandon_flag_table(plan.cluster_id))
    if options.record and cluster.launch_run is None:
        # Started without waiting for ready: recorded with an open outcome.
        cluster.launch_run = record_launch(session, emit, cluster, digests, None)


async def _flags_refused(
    session: Session, check: asyncio.Future[list[Finding]], cluster: Cluster
) -> OperationFailed | None:
    """The launch refusal the flag check's answer makes (None: no refusal, or no answer);
    the answer is kept for the next evaluation of these settings."""
    from spark_tui.ops.image_flags import refusal
    from spark_tui.service.prepared import flag_key

    plan = cluster.plan
    assert plan is not None
    try:
        findings = await asyncio.shield(check)
    except SparkError:
        return None
    session.prepared.flags[flag_key(plan)] = findings
    return refusal(findings, cluster.recipe, plan.head.container.image, started=True)


async def _interrupt(upcoming: asyncio.Future[Any] | None) -> None:
    """Cancel a step under way (the launch) and wait for it to end, even when cancelled
    again meanwhile (at most STOP_ON_CANCEL_WAIT; the cancellation is raised after)."""
    if upcoming is None:
        return
    cancelled = False
    if not upcoming.done():
        upcoming.cancel()
        # A launch cancelled on the nodes removes what it started by cluster id: left to
        # end on its own, it would remove what the next launch of the same cluster (a
        # sweep's "leave the best running") starts.
        deadline = time.monotonic() + STOP_ON_CANCEL_WAIT
        while not upcoming.done() and time.monotonic() < deadline:
            try:
                await asyncio.wait({upcoming}, timeout=deadline - time.monotonic())
            except asyncio.CancelledError:
                cancelled = True
    _dropped(upcoming)
    if cancelled:
        raise asyncio.CancelledError


def _dropped(step: asyncio.Future[Any]) -> None:
    """A step whose outcome is dropped on purpose (a stream that ended or failed while it
    was interrupted, a flag check no longer needed): retrieved, so that asyncio does not
    report it as unretrieved (a traceback on the terminal)."""
    if step.done() and not step.cancelled():
        step.exception()


async def _beside_check(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    launching: asyncio.Future[None],
    check: asyncio.Future[list[Finding]] | None,
    cluster: Cluster,
) -> None:
    """The launch, while the image's flag check (when under way) finishes: a flag it
    refuses before the cluster is ready stops the launch, removes its ranks and refuses
    it (once ready, vLLM has taken every flag itself). A launch that ends without waiting
    for ready waits for the check. Interrupted: the launch is cancelled and let end (it
    removes what it started)."""
    plan = cluster.plan
    assert plan is not None
    try:
        while True:
            waiting = {f for f in (launching, check) if f is not None and not f.done()}
            if waiting:
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if check is not None and check.done():
                refused = await _flags_refused(session, check, cluster)
                check = None
                if refused is not None and not cluster.ready:
                    # The launch first (it may be making the next container), then what
                    # it made.
                    await _interrupt(launching)
                    await session.nodes.stop(plan.cluster_id, emit)
                    raise refused
            if launching.done():
                launching.result()  # its failure, as it is
                if check is None:
                    return
    finally:
        await _interrupt(launching)


async def replace_running(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    ask: Ask,
    replace: bool | None,
    nodes: Sequence[str],
    cluster_id: str,
) -> bool:
    """A cluster of ours already on any of `nodes` (the launch's, whose cluster is
    `cluster_id`) holds the memory and the ports the launch needs: stopped (asked unless
    `replace`). Clusters on other nodes are left serving: two services run side by side on
    disjoint nodes. True when one was stopped."""
    wanted = set(nodes)
    found = [c for c in await session.nodes.status() if c.ranks]
    running = [c for c in found if wanted & set(c.nodes)]
    if not running:
        return False
    names = ", ".join(
        f"{c.cluster_id} ({c.recipe} on {', '.join(dict.fromkeys(c.nodes))})" for c in running
    )
    if not replace:
        yes = replace is None and await ask(
            ev.Question(
                ev.REPLACE_STALE,
                "A cluster of ours is on these nodes",
                f"spark-tui cluster {names} is on nodes this launch needs and holds their "
                "memory.\nStop it and launch this one?",
                default=False,
                yes_label="Stop it and launch",
                data={"clusters": [c.cluster_id for c in running]},
            )
        )
        if not yes:
            busy = {n for c in found for n in c.nodes}
            free = [n.name for n in session.inventory if n.name not in busy]
            ways = [
                f"stop it first (`spark-tui stop {session.where} --cluster "
                + " / --cluster ".join(c.cluster_id for c in running)
                + "`)",
                "pass --replace to stop it and launch this one",
            ]
            if free:
                ways.append(
                    f"or launch beside it on nodes no cluster of ours uses: --on {','.join(free)}"
                )
            raise OperationFailed(
                f"spark-tui cluster {names} is already on nodes this launch needs "
                f"({', '.join(n for n in nodes if any(n in c.nodes for c in running))})",
                ", ".join(ways),
            )
    emit(ev.Notice("info", f"replacing {names}: stopping every rank first"))
    if any(c.cluster_id == cluster_id for c in running):
        # The same recipe on the same nodes is the same cluster, so its stop would also
        # remove this launch's own flag table run (its help container is the cluster's)
        # and leave the flags unchecked: that run is given up first, and started again
        # once the old ranks are gone.
        await session.nodes.abandon_flag_table(cluster_id)
    for c in running:
        await stop_all(session, emit, c.cluster_id)
    return True


def refuse_flags(recipe: Recipe, evaluation: Evaluation) -> None:
    """A flag the image's vLLM refuses blocks the launch, --force or not."""
    from spark_tui.ops.image_flags import refusal

    plan, report = evaluation.plan, evaluation.report
    if plan is None or report is None:
        return
    refused = refusal(report.findings, recipe.name, plan.head.container.image)
    if refused is not None:
        raise refused


async def insist(ask: Ask | None, recipe: Recipe, evaluation: Evaluation) -> None:
    """The fit check says no (or cannot check): launch anyway only if the user says so. A
    no (or no one to ask, or `ask` None: decided up front) is an error that says what was
    decided and why, once."""
    report = evaluation.report
    findings = report.findings if report else []
    # Why: the errors, else the facts it lacks (the other warnings do not block).
    why = [f for f in findings if f.severity == "error"] or [
        f for f in findings if f.code == "facts_missing"
    ]
    reasons = "\n".join(f"• {f.message}\n  → {f.remedy}" for f in why)
    verdict = "does not fit" if evaluation.verdict == "does_not_fit" else "cannot be checked"
    question = ev.Question(
        ev.INSIST,
        "Launch refused by the fit check",
        f"{recipe.name} {verdict} on these nodes:\n{reasons}\n\n"
        "vLLM will most likely fail at startup. Launch anyway?",
        default=False,
        yes_label="Launch anyway",
        data={"verdict": evaluation.verdict},
    )
    if ask is None:
        decided = "launching anyway is not offered here"
    elif await ask(question):
        return
    elif question.answer is None:
        # Unanswered: no one could be asked (a headless run without a terminal).
        decided = "no terminal could confirm launching anyway"
    else:
        decided = "launching anyway was declined"
    fit = "it does not fit" if evaluation.verdict == "does_not_fit" else "fit unknown"
    because = "; ".join(f.message for f in why) or f"the fit check says {evaluation.verdict}"
    remedies = list(dict.fromkeys(f.remedy for f in why))
    if ask is not None:  # where launching anyway is not offered, --force is no way out
        remedies.append("or pass --force to launch anyway")
    raise OperationFailed(
        f"not launching {recipe.name}: {fit} ({because}); {decided}", "; ".join(remedies)
    )


def record_launch(
    session: Session,
    emit: Emit[ev.LaunchEvent],
    cluster: Cluster,
    digests: dict[str, str],
    ok: bool | None,
) -> Run | None:
    """The launch in the history (a failure to write it is said, not raised)."""
    from spark_tui.core.facts import cached_revision

    plan = cluster.plan
    if plan is None:
        return None
    try:
        run = session.history.record_launch(
            plan,
            overrides=cluster.overrides,
            digests=digests,
            revision=cached_revision(session.reachable, plan.model),
            ok=ok,
            defaults=cluster.defaults,
        )
    except (OSError, ValueError, TypeError) as exc:
        emit(ev.Recorded("launch", None, f"the launch was not recorded: {exc}"))
        return None
    emit(ev.Recorded("launch", run.id))
    return run

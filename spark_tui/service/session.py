"""One cockpit or CLI run over the nodes: the connection pool, the cluster it launched or
attached to, and every user action as one async generator of typed events.

Actions: `discover` / `probe` (nodes), `evaluate` (see `service.evaluate`), `launch`,
`attach`, `stop`, `status`, `watch` (see `ops.watch`), `smoke` and `bench` (see
`service.measure`), `tune` (see `service.tune`), `sync_models` and `sync_image` (see
`service.sync`). A question to the user (trust a host key, replace stale containers,
launch although the fit check refuses) is a `Question` event the consumer answers.

The methods whose names start with `_` are the only places that touch the nodes or the
API; a test double replaces them, the rest runs as in the product.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import OperationFailed, SparkError, UnreachableError
from spark_tui.service import events as ev
from spark_tui.service.endpoint import head_node, tunnel_command
from spark_tui.service.pump import Ask, Emit, pump

# The evaluation (and with it the fit model and the plan) is imported where it is first
# used: the cockpit paints its first frame before it evaluates anything.
if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.fit import Finding
    from spark_tui.core.inventory import InventoryNode
    from spark_tui.core.plan import LaunchPlan
    from spark_tui.core.recipe import Recipe
    from spark_tui.ops.bench import BenchConfig, BenchProgress, LevelResult
    from spark_tui.ops.cluster import ClusterStatus, StopReport
    from spark_tui.ops.history import History, Run
    from spark_tui.ops.launch import StaleContainer
    from spark_tui.ops.smoke import SmokeResult
    from spark_tui.service.evaluate import Evaluation
    from spark_tui.service.prepared import Prepared


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
    endpoint: ev.Endpoint | None = None
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
            return _flag(argv, "--served-model-name") or argv[2]
        return None

    @property
    def utilization(self) -> float:
        from spark_tui.service.evaluate import gpu_memory_utilization

        return gpu_memory_utilization(self.head_argv)

    @property
    def api_port(self) -> int:
        from spark_tui.core.plan import DEFAULT_API_PORT

        value = _flag(self.head_argv, "--port")
        return int(value) if value and value.isdigit() else DEFAULT_API_PORT


@dataclass
class ApiTarget:
    """An API to measure, and what the serve command says about it."""

    base_url: str
    via_cluster: bool = False
    model: str | None = None
    expect_reasoning: bool | None = None
    tool_call_parser: str | None = None
    launch: Run | None = None


def _flag(argv: Sequence[str], flag: str) -> str | None:
    for i, tok in enumerate(argv):
        if tok == flag and i + 1 < len(argv):
            return str(argv[i + 1])
        if tok.startswith(flag + "="):
            return tok.split("=", 1)[1]
    return None


def _alert_of(failed: Sequence[ev.RankStateChanged], head: int) -> ev.WatchAlert:
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


def target_from_argv(base_url: str, argv: Sequence[str], **kw: Any) -> ApiTarget:
    """What a head rank's `vllm serve` argv says about the service (model, parsers)."""
    argv = [str(a) for a in argv]
    t = ApiTarget(base_url, **kw)
    if len(argv) > 2 and argv[1] == "serve":
        t.model = _flag(argv, "--served-model-name") or argv[2]
        t.expect_reasoning = _flag(argv, "--reasoning-parser") is not None
        t.tool_call_parser = _flag(argv, "--tool-call-parser")
    return t


class Session:
    """The nodes of one run, their pool and our cluster on them (see module doc)."""

    simulated = False
    # Where a model downloaded on this machine is kept (None: the Hugging Face default).
    sync_cache: Path | None = None
    # The CLI flags naming these nodes, for the remedies a sync gives (`models sync ...`).
    where: str = "--inventory FILE"
    # How the interface runs a sync, for the remedies of the gaps a launch finds (None:
    # the CLI's `models sync` / `images sync` for `where`).
    sync_hint: str | None = None

    def __init__(
        self,
        nodes: Sequence[InventoryNode],
        *,
        accept_new_host_keys: bool = False,
        history: History | None = None,
        bench_config: BenchConfig | None = None,
        label: str | None = None,
        reattach_hint: str | None = None,
    ) -> None:
        self.inventory = list(nodes)
        self.accept_new_host_keys = accept_new_host_keys
        self._history = history
        self._bench_config = bench_config
        self.label = label or f"{len(self.inventory)} nodes: " + ", ".join(
            n.name for n in self.inventory
        )
        self.reattach_hint = reattach_hint or "`spark-tui` with the same --inventory or --hosts"
        self.pool: Any = None
        self.facts: list[NodeFacts] = []
        self.errors: dict[str, tuple[str, str | None]] = {}
        self.cluster: Cluster | None = None
        # Set when the user chose to leave the cluster running: an interrupted launch then
        # leaves its ranks too.
        self.keep_on_cancel = False
        self._ask: Ask | None = None
        self._prepared: Prepared | None = None

    # -- what the session holds ----------------------------------------------------------

    @property
    def history(self) -> History:
        if self._history is None:
            from spark_tui.ops.history import History

            self._history = History()
        return self._history

    @property
    def bench_config(self) -> BenchConfig:
        """The benchmark settings of this run: the same in the CLI and the cockpit."""
        if self._bench_config is None:
            from spark_tui.ops.bench import BenchConfig

            self._bench_config = BenchConfig()
        return self._bench_config

    @property
    def reachable(self) -> list[NodeFacts]:
        return [n for n in self.facts if n.name not in self.errors]

    def held_memory(self) -> dict[str, int]:
        """Memory our running clusters hold per node (a launch replacing them gets it back),
        each counted once (see service.evaluate.held_memory)."""
        from spark_tui.service.evaluate import held_memory

        cluster = self.cluster
        known = {}
        if cluster is not None and cluster.running:
            known[cluster.cluster_id] = ([n for _rank, n in cluster.ranks], cluster.utilization)
        return held_memory(self.reachable, known)

    @property
    def prepared(self) -> Prepared:
        """The Hub's answers and the image flag checks this session fetched."""
        if self._prepared is None:
            from spark_tui.service.images import ImageAnswers
            from spark_tui.service.model_facts import HubAnswers
            from spark_tui.service.prepared import Prepared

            # Simulated Sparks hold the images they were given: nothing is resolved there.
            self._prepared = Prepared(HubAnswers(self.sync_env), ImageAnswers(not self.simulated))
        return self._prepared

    def evaluate(self, recipe: Recipe, overrides: Mapping[str, Any]) -> Evaluation:
        """The verdict on the reachable nodes (see service.evaluate.assess), from the facts
        fetched so far: it never waits (`prepare` fetches what is missing)."""
        return self.prepared.assess(
            recipe,
            overrides,
            self.reachable,
            held=self.held_memory(),
            where=self.where,
            remedy=self.sync_hint,
        )

    async def prepare(
        self,
        recipe: Recipe,
        overrides: Mapping[str, Any],
        *,
        retry: bool = False,
        flags: bool = True,
        emit: Emit | None = None,
    ) -> bool:
        """Fetch what `evaluate` needs and has not got: the model's facts from the Hub (in a
        worker thread) and the image's flag check of every rank. True when anything new
        came in; `retry`: ask again where the last answer was a failure; not `flags`: the
        Hub only (the flag check runs a container on the head); `emit` gets a notice of
        what the Hub is asked and how long it may take, before it is asked."""

        async def check_flags(plan: LaunchPlan) -> list[Finding]:
            return await self._image_flags(plan, lambda _event: None, pull=False)

        self.start_flag_table(recipe, overrides)
        return await self.prepared.fetch(
            lambda: self.evaluate(recipe, overrides),
            self.reachable,
            check_flags if flags else None,
            retry=retry,
            waiting=None if emit is None else lambda text: emit(ev.Notice("info", text)),
        )

    def start_flag_table(self, recipe: Recipe, overrides: Mapping[str, Any] | None = None) -> None:
        """Start building the flag table of the recipe's image on the head in the
        background (ops.image_flags.FlagTables): the flag check then awaits a table built
        while the nodes are probed and the model's facts fetched, not after them. With
        `overrides`, only when the evaluation has a plan to check (its head, its image)."""
        if self.pool is None:
            return
        head = next((n.name for n in self.inventory if n.name not in self.errors), None)
        image = recipe.container
        if overrides is not None:
            evaluation = self.evaluate(recipe, overrides)
            plan = evaluation.plan
            if plan is None or evaluation.problem is not None:
                return  # no flag check will be made
            head, image = plan.head.node, plan.head.container.image
        image = self.prepared.images.runs(image)  # a sentinel: its nightly, once resolved
        if head is None or not image:
            return
        from spark_tui.ops.image_flags import start_flag_table

        start_flag_table(self.pool, head, image)

    def endpoint(self, cluster_id: str, head: str, api_port: int) -> ev.Endpoint:
        """The API on `head` and the tunnel command for it from the inventory."""
        node = head_node(self.inventory, head)
        address = node.host if node else head
        tunnel = (
            tunnel_command(node, api_port)
            if node
            else f"ssh -N -L {api_port}:127.0.0.1:{api_port} {head}"
        )
        local = (
            self.cluster.base_url
            if self.cluster and self.cluster.cluster_id == cluster_id
            else None
        )
        return ev.Endpoint(
            cluster_id=cluster_id,
            head=head,
            api_url=f"http://{address}:{api_port}/v1",
            local_url=local,
            tunnel=tunnel,
        )

    # -- nodes -----------------------------------------------------------------------------

    def discover(self) -> AsyncIterator[Any]:
        """Connect to every node (unknown host keys are questions) and probe them: Probed."""
        return self._pumped(self._discover)

    def probe(self) -> AsyncIterator[Any]:
        """Probe again (reconnecting nodes that dropped): Probed."""
        return self._pumped(self._discover)

    async def _discover(self, emit: Emit, ask: Ask) -> None:
        await self._open()
        facts = await self._probe()
        self.facts = facts
        self.errors = {}
        for node in facts:
            if node.errors and node.memory_total_bytes is None:
                message, _, remedy = node.errors[0].partition(" (remedy: ")
                self.errors[node.name] = (message, remedy.rstrip(")") or None)
        emit(ev.Probed(list(facts), dict(self.errors)))

    async def confirm_host_key(self, host: str, fingerprint: str) -> bool:
        """The pool's host-key callback: a question to whoever consumes the action."""
        if self._ask is None:
            return False
        question = ev.Question(
            ev.HOST_KEY,
            "Unknown host key",
            f"The authenticity of {host} can't be established.\n"
            f"Its key fingerprint is {fingerprint}.\nTrust it and connect?",
            default=False,
            yes_label="Trust",
            data={"host": host, "fingerprint": fingerprint},
        )
        return await self._ask(question)

    def _pumped(self, work: Any) -> AsyncIterator[Any]:
        async def run(emit: Emit, ask: Ask) -> None:
            previous, self._ask = self._ask, ask
            try:
                await work(emit, ask)
            finally:
                self._ask = previous

        return pump(run)

    # -- launch ------------------------------------------------------------------------------

    def launch(
        self,
        recipe: Recipe,
        overrides: Mapping[str, Any],
        *,
        insist: bool | None = None,
        replace: bool | None = None,
        wait_ready: bool = True,
        follow: bool = True,
        keep_failed: bool = False,
        ready_timeout: float = 1800.0,
    ) -> AsyncIterator[Any]:
        """Replace a running cluster of ours (asked unless `replace`), probe, evaluate,
        refuse a launch the fit check says no to (asked unless `insist`), start every
        rank, follow them to ready and record the launch (with its image digests and
        model revision, failed or not). Raises LaunchFailed when a rank fails."""

        async def work(emit: Emit, ask: Ask) -> None:
            await self._launch_work(
                emit,
                ask,
                recipe,
                dict(overrides),
                insist=insist,
                replace=replace,
                wait_ready=wait_ready,
                follow=follow,
                keep_failed=keep_failed,
                ready_timeout=ready_timeout,
            )

        return self._pumped(work)

    async def _launch_work(
        self,
        emit: Emit,
        ask: Ask,
        recipe: Recipe,
        overrides: dict[str, Any],
        *,
        insist: bool | None,
        replace: bool | None,
        wait_ready: bool,
        follow: bool,
        keep_failed: bool,
        ready_timeout: float,
        record: bool = True,
        on_ready: Any = None,
    ) -> Cluster:
        from spark_tui.ops.launch import LaunchFailed
        from spark_tui.service.history import RankTails, recipe_defaults

        await self._open(strict=True)
        self.start_flag_table(recipe)  # while the nodes are probed and the fit evaluated
        await self._discover(emit, ask)
        # The verdict `check` and the fit panel give (model facts from the Hub when no node
        # has them, our running cluster's memory counted free, gaps, the image's flag check
        # of every rank), before the running cluster is replaced: a launch refused leaves it
        # alone. An image not on the head yet is checked after the fit question.
        await self.prepare(recipe, overrides, retry=True, emit=emit)
        evaluation = self.evaluate(recipe, overrides)
        emit(ev.Evaluated(evaluation))
        if evaluation.problem is not None:
            raise evaluation.problem
        if evaluation.plan is None:
            raise OperationFailed(
                "no reachable node to launch on", "check the nodes (`spark-tui probe`)"
            )
        self._refuse_flags(recipe, evaluation)
        from spark_tui.service.images import refuse_unresolved

        refuse_unresolved(evaluation.report.findings if evaluation.report else [])
        if evaluation.needs_insisting() and not insist:
            await self._insist(ask, recipe, evaluation)
        if await self._replace_running(emit, ask, replace):
            await self._discover(emit, ask)  # the nodes as the launch finds them
        plan = evaluation.plan
        report = evaluation.report
        if report is not None and any(f.code == "image_not_pulled" for f in report.findings):
            report.findings = [f for f in report.findings if f.code != "image_not_pulled"]
            from spark_tui.service.evaluate import add_findings

            add_findings(evaluation, await self._image_flags(plan, emit, pull=True))
            self._refuse_flags(recipe, evaluation)
        cluster = Cluster(
            plan.cluster_id,
            recipe.name,
            overrides=dict(overrides),
            defaults=recipe_defaults(recipe),
            ranks=[(r.rank, r.node) for r in plan.ranks],
            head_argv=list(plan.head.argv),
            plan=plan,
        )
        self.cluster = cluster
        cluster.endpoint = self.endpoint(plan.cluster_id, plan.head.node, cluster.api_port)
        emit(cluster.endpoint)

        async def replace_stale(stale: list[StaleContainer]) -> bool:
            if replace:
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

        digests: dict[str, str] = {}
        started = False
        failed: list[ev.RankStateChanged] = []
        tails = RankTails()
        cluster.followed = True
        try:
            async for event in self._launch_events(
                plan,
                replace_stale,
                keep_failed=keep_failed,
                wait_ready=wait_ready,
                follow=follow,
                ready_timeout=ready_timeout,
            ):
                tails.see(event)
                if isinstance(event, ev.RankStateChanged) and event.state is ev.RankState.CREATED:
                    started = True
                if isinstance(event, ev.RankStateChanged) and event.state is ev.RankState.FAILED:
                    failed.append(event)
                if isinstance(event, ev.ResultEvent) and event.kind == "launch":
                    digests = dict(event.payload.get("image_digests") or {})
                    continue
                if isinstance(event, ev.ClusterReady):
                    cluster.base_url = event.base_url
                    cluster.ready = True
                    cluster.endpoint = self.endpoint(
                        plan.cluster_id, plan.head.node, cluster.api_port
                    )
                    if record:
                        cluster.launch_run = self._record_launch(emit, cluster, digests, True)
                    emit(event)
                    emit(cluster.endpoint)
                    if on_ready is not None:
                        on_ready(cluster, digests)
                    continue
                emit(event)
        except LaunchFailed as exc:
            cluster.failed = True
            cluster.unwatched = keep_failed  # the other ranks were left for inspection
            if cluster.ready and failed:
                # Failed while serving: the same alert a watch gives (the rank that went
                # first, its lines, the head's when a worker went first).
                emit(_alert_of(failed, plan.head.rank))
            if record and cluster.launch_run is None:
                cluster.launch_run = self._record_launch(emit, cluster, digests, False)
            elif record and cluster.launch_run is not None:
                # It was ready, then a rank failed: the same run, now failed.
                run = cluster.launch_run
                run.ok = False
                run.notes.append(f"failed after it was ready: {exc.message}")
                with contextlib.suppress(OSError):
                    cluster.launch_run = self.history.save(run)
            tails.keep(self.history, cluster.launch_run, exc.message)
            if started and not keep_failed:  # kept: the launch has said so
                emit(self._settled(cluster.cluster_id, cluster.launch_run, keep_failed))
            raise
        except asyncio.CancelledError:
            # Interrupted before the cluster was up: remove what this launch started.
            if started and not cluster.ready and not self.keep_on_cancel:
                cluster.failed = True
                with contextlib.suppress(SparkError):
                    await asyncio.shield(self._stop(plan.cluster_id, None))
            raise
        except SparkError as exc:
            cluster.failed = True
            # A watch that lost a node leaves the ranks as they are (they may run on).
            cluster.unwatched = started and isinstance(exc, UnreachableError)
            raise
        finally:
            cluster.followed = False
        if record and cluster.launch_run is None:
            # Started without waiting for ready: recorded with an open outcome.
            cluster.launch_run = self._record_launch(emit, cluster, digests, None)
        return cluster

    async def _replace_running(self, emit: Emit, ask: Ask, replace: bool | None) -> bool:
        """A cluster of ours already on the nodes holds the memory a launch needs: stopped
        (asked unless `replace`). True when one was."""
        running = [c for c in await self._status() if c.ranks]
        if not running:
            return False
        names = ", ".join(f"{c.cluster_id} ({c.recipe})" for c in running)
        if not replace:
            yes = replace is None and await ask(
                ev.Question(
                    ev.REPLACE_STALE,
                    "A cluster of ours is on these nodes",
                    f"spark-tui cluster {names} is on these nodes and holds their memory.\n"
                    "Stop it and launch this one?",
                    default=False,
                    yes_label="Stop it and launch",
                    data={"clusters": [c.cluster_id for c in running]},
                )
            )
            if not yes:
                raise OperationFailed(
                    f"spark-tui cluster {names} is already on these nodes",
                    "stop it first (`spark-tui stop` with the same --inventory/--hosts), "
                    "or pass --replace to stop it and launch this one",
                )
        emit(ev.Notice("info", f"replacing {names}: stopping every rank first"))
        report = await self._stop(None, emit)
        emit(ev.Stopped(None, list(report.removed), list(report.left)))
        self.cluster = None
        return True

    @staticmethod
    def _refuse_flags(recipe: Recipe, evaluation: Evaluation) -> None:
        """A flag the image's vLLM refuses blocks the launch, --force or not."""
        from spark_tui.ops.image_flags import refusal

        plan, report = evaluation.plan, evaluation.report
        if plan is None or report is None:
            return
        refused = refusal(report.findings, recipe.name, plan.head.container.image)
        if refused is not None:
            raise refused

    async def _insist(self, ask: Ask, recipe: Recipe, evaluation: Evaluation) -> None:
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
        if await ask(question):
            return
        # Unanswered: no one could be asked (a headless run without a terminal).
        decided = "launching anyway was declined"
        if question.answer is None:
            decided = "no terminal could confirm launching anyway"
        fit = "it does not fit" if evaluation.verdict == "does_not_fit" else "fit unknown"
        because = "; ".join(f.message for f in why) or f"the fit check says {evaluation.verdict}"
        remedies = list(dict.fromkeys(f.remedy for f in why))
        raise OperationFailed(
            f"not launching {recipe.name}: {fit} ({because}); {decided}",
            "; ".join([*remedies, "or pass --force to launch anyway"]),
        )

    def _record_launch(
        self, emit: Emit, cluster: Cluster, digests: dict[str, str], ok: bool | None
    ) -> Run | None:
        from spark_tui.core.facts import cached_revision

        plan = cluster.plan
        if plan is None:
            return None
        try:
            run = self.history.record_launch(
                plan,
                overrides=cluster.overrides,
                digests=digests,
                revision=cached_revision(self.reachable, plan.model),
                ok=ok,
                defaults=cluster.defaults,
            )
        except (OSError, ValueError, TypeError) as exc:
            emit(ev.Recorded("launch", None, f"the launch was not recorded: {exc}"))
            return None
        emit(ev.Recorded("launch", run.id))
        return run

    # -- attach, stop, status ---------------------------------------------------------------

    async def running(self) -> ClusterStatus | None:
        """The running cluster of ours on the nodes, if there is exactly one."""
        live = [c for c in await self._status() if c.running]
        return live[0] if len(live) == 1 else None

    def attach(self, found: ClusterStatus, *, keep_failed: bool = False) -> AsyncIterator[Any]:
        """Follow a running cluster of ours like a launch (its logs, ready, failures: the
        other ranks stopped, unless `keep_failed`)."""

        async def work(emit: Emit, ask: Ask) -> None:
            head = found.ranks[0]
            cluster = Cluster(
                found.cluster_id,
                found.recipe or "?",
                ranks=[(r.rank, r.node) for r in found.ranks],
                head_argv=list(head.command),
            )
            cluster.launch_run = self.history.launch_of(found.cluster_id, found.recipe)
            if cluster.launch_run is not None:
                cluster.overrides = dict(cluster.launch_run.overrides)
            self.cluster = cluster
            cluster.endpoint = self.endpoint(found.cluster_id, head.node, cluster.api_port)
            emit(cluster.endpoint)
            cluster.followed = True
            try:
                async for event in self._attach_events(found.cluster_id, keep_failed=keep_failed):
                    if isinstance(event, ev.ClusterReady):
                        cluster.base_url = event.base_url
                        cluster.ready = True
                    emit(event)
            except SparkError as exc:
                cluster.failed = True
                cluster.unwatched = isinstance(exc, UnreachableError) or keep_failed
                raise
            finally:
                cluster.followed = False

        return self._pumped(work)

    def stop(self, cluster_id: str | None = None) -> AsyncIterator[Any]:
        """Remove every rank's container (of `cluster_id`, else of all our clusters) and
        check again that none is left: Stopped. Raises OperationFailed naming any left."""

        async def work(emit: Emit, ask: Ask) -> None:
            # The history's records load pydantic's models: not at import (the cockpit's
            # first frame), when a run is kept.
            from spark_tui.service.history import keep_stopped_logs

            await self._open(strict=True)
            report = await self._stop(cluster_id, emit)
            keep_stopped_logs(self.history, report)
            cluster = self.cluster
            if cluster is not None and cluster_id in (None, cluster.cluster_id):
                cluster.failed = True
                cluster.ready = False
                self.cluster = None
            emit(
                ev.Stopped(cluster_id, list(report.removed), list(report.left), list(report.killed))
            )

        return self._pumped(work)

    async def status(self) -> list[tuple[ClusterStatus, ev.Endpoint]]:
        """Our clusters on the nodes, each with its endpoint and tunnel command."""
        await self._open(strict=True)
        out = []
        for c in await self._status():
            head = c.ranks[0] if c.ranks else None
            if head is None:
                continue
            argv = list(head.command)
            port = Cluster(c.cluster_id, c.recipe or "?", head_argv=argv).api_port
            out.append((c, self.endpoint(c.cluster_id, head.node, port)))
        return out

    def watch(
        self,
        cluster_id: str | None = None,
        *,
        interval: float = 5.0,
        request_timeout: float = 10.0,
        cleanup: str | None = None,
        keep_failed: bool = False,
    ) -> AsyncIterator[Any]:
        """Watch a ready cluster (the one named, else ours, else the only one on the nodes):
        WatchStarted, then ProbeResult, ServiceGauges, NodeMemory, ContainerStates and
        NodeNotAnswering as they are sampled, every `interval` s, until a WatchAlert (the
        rank that failed, its lines, the head's) ends it. Then, as after a launch, every
        rank is stopped and its last lines kept in the history (Stopped, a Notice saying
        so); `keep_failed` keeps them for inspection, and the alert names `cleanup`, the
        command that removes them. Raises OperationFailed when there is nothing to watch."""

        async def work(emit: Emit, ask: Ask) -> None:
            await self._open(strict=True)
            ours = self.cluster if self.cluster is not None and self.cluster.running else None
            wanted = cluster_id or (ours.cluster_id if ours else None)
            alert: ev.WatchAlert | None = None
            async for event in self._watch_events(
                wanted,
                interval=interval,
                request_timeout=request_timeout,
                cleanup=cleanup if keep_failed else None,
            ):
                if isinstance(event, ev.WatchStarted):
                    wanted = event.cluster_id
                alert = event if isinstance(event, ev.WatchAlert) else alert
                emit(event)
            if alert is not None:
                await self._settle_watched(emit, alert, wanted, keep_failed)

        return self._pumped(work)

    async def _settle_watched(
        self, emit: Emit, alert: ev.WatchAlert, cluster_id: str | None, keep_failed: bool
    ) -> None:
        """After a watch's alert: the other ranks stopped and their lines kept (else kept
        for inspection), as a failed launch leaves them. `cluster_id` None: the only
        cluster on the nodes (the watch picked it for being the only one)."""
        from spark_tui.service.history import keep_stopped_logs

        ours = self.cluster
        if ours is not None and cluster_id in (None, ours.cluster_id) and ours.followed:
            return  # the launch or attach that follows it settles it
        found = [c for c in await self._status() if cluster_id in (None, c.cluster_id)]
        cluster_id = cluster_id or (found[0].cluster_id if found else None)
        run = self.history.launch_of(cluster_id) if cluster_id else None
        if not keep_failed:
            if run is not None:
                with contextlib.suppress(OSError, SparkError):
                    why = f"rank {alert.rank} on {alert.node} {alert.reason}"
                    run = self.history.mark_failed(run.id, f"failed after it was ready: {why}")
            report = await self._stop(cluster_id, emit)
            keep_stopped_logs(self.history, report, reason=f"stopped: rank {alert.rank} failed")
            emit(
                ev.Stopped(cluster_id, list(report.removed), list(report.left), list(report.killed))
            )
        if ours is not None and cluster_id == ours.cluster_id:
            ours.failed = True
            ours.unwatched = keep_failed
        if cluster_id is not None:
            emit(self._settled(cluster_id, run, keep_failed))

    @staticmethod
    def _settled(cluster_id: str, run: Run | None, keep_failed: bool) -> ev.Notice:
        """What became of a cluster whose rank failed, and where its logs are (the history's
        launch record of the cluster: `History.launch_of`)."""
        where = " in the history" if run is not None else ""
        if keep_failed:
            return ev.Notice(
                "warning",
                f"the ranks of cluster {cluster_id} are kept for inspection (keep failed)",
                "read their logs, then stop them",
            )
        # A warning: the cockpit shows it beside the failure, not under the next status.
        return ev.Notice(
            "warning",
            f"every rank of cluster {cluster_id} was stopped and removed"
            + (f"; their last log lines are kept{where}" if where else ""),
        )

    # -- measuring (see service.measure and service.tune) ----------------------------------

    def smoke(
        self, *, base_url: str | None = None, model: str | None = None, **kw: Any
    ) -> AsyncIterator[Any]:
        from spark_tui.service.measure import smoke

        return self._pumped(
            lambda emit, ask: smoke(self, emit, base_url=base_url, model=model, **kw)
        )

    def bench(
        self,
        config: BenchConfig | None = None,
        *,
        base_url: str | None = None,
        model: str | None = None,
    ) -> AsyncIterator[Any]:
        from spark_tui.service.measure import bench

        return self._pumped(
            lambda emit, ask: bench(self, emit, config or self.bench_config, base_url, model)
        )

    def tune(
        self,
        recipe: Recipe,
        setting: str,
        value: Any,
        *,
        baseline: str | None = None,
        new_baseline: bool = False,
        follow: bool = True,
    ) -> AsyncIterator[Any]:
        """One change, measured against the baseline (see `service.tune`)."""
        from spark_tui.service.tune import tune

        return self._pumped(
            lambda emit, ask: tune(
                self,
                emit,
                ask,
                recipe,
                setting,
                value,
                baseline=baseline,
                new_baseline=new_baseline,
                follow=follow,
            )
        )

    # -- syncing (see service.sync) -----------------------------------------------------

    def sync_models(
        self,
        recipe: Recipe,
        overrides: Mapping[str, Any] | None = None,
        *,
        where: str = "--inventory FILE",
        probe_after: bool = False,
    ) -> AsyncIterator[Any]:
        """The recipe's model and draft model on every node: downloaded once, copied node
        to node. `where` (the CLI flags naming the nodes) goes into remedies."""
        from spark_tui.service.sync import sync_models

        return self._pumped(
            lambda emit, ask: sync_models(
                self, emit, ask, recipe, overrides or {}, where=where, probe_after=probe_after
            )
        )

    def sync_image(self, recipe: Recipe, *, probe_after: bool = False) -> AsyncIterator[Any]:
        """The head's image of the recipe on every node: pulled, else copied node to node."""
        from spark_tui.service.sync import sync_image

        return self._pumped(
            lambda emit, ask: sync_image(self, emit, ask, recipe, probe_after=probe_after)
        )

    def sync_env(self) -> dict[str, str]:
        """The environment a model download sees (HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE)."""
        import os

        return dict(os.environ)

    async def api_target(self, base_url: str | None, model: str | None) -> ApiTarget:
        """The API to measure: the one given, our cluster's, or the running cluster's found
        on the nodes through a forward (valid while the session is open)."""
        if base_url:
            return ApiTarget(base_url, model=model)
        cluster = self.cluster
        if cluster is not None and cluster.ready and cluster.base_url:
            t = target_from_argv(cluster.base_url, cluster.head_argv, via_cluster=True)
            t.launch = cluster.launch_run
        else:
            await self._open(strict=True)
            found = await self._find_api()
            head = found.ranks[0] if found.ranks else {}
            t = target_from_argv(found.base_url, head.get("argv") or [], via_cluster=True)
            t.launch = self.history.launch_of(found.cluster_id, found.recipe)
        t.model = model or t.model
        return t

    async def connect(self, *, strict: bool = True) -> None:
        """Open the pool (for commands that use it directly, like `logs`)."""
        await self._open(strict=strict)

    # -- the seams: the only code that reaches the nodes or the API ------------------------

    async def _open(self, *, strict: bool = False) -> None:
        """Connect (again) to the nodes; `strict`: any unreachable node is an error (a launch,
        a stop or a status must not silently leave one out)."""
        if self.pool is None:
            from spark_tui.remote.ssh import ConnectionPool

            self.pool = ConnectionPool(
                self.inventory,
                accept_new_host_keys=self.accept_new_host_keys,
                confirm=self.confirm_host_key,
            )
        # Opens every node; on later calls reconnects the ones that dropped.
        await self.pool.open(partial=not strict)

    async def _probe(self) -> list[NodeFacts]:
        from spark_tui.remote.probe import probe_pool

        return list(await probe_pool(self.pool, partial=True))

    async def _status(self) -> list[ClusterStatus]:
        from spark_tui.ops.cluster import status

        return list(await status(self.pool))

    async def _image_flags(self, plan: LaunchPlan, emit: Emit, *, pull: bool) -> list[Finding]:
        """The flag check of the plan against its image's vLLM on the head (see
        ops.image_flags); `pull`: pull the image on the head first when it is missing."""
        from spark_tui.ops.image_flags import plan_flag_findings

        def progress(line: str) -> None:
            emit(ev.Notice("info", line))

        return await plan_flag_findings(self.pool, plan, pull=progress if pull else None)

    def _launch_events(self, plan: LaunchPlan, replace_stale: Any, **kw: Any) -> AsyncIterator[Any]:
        from spark_tui.ops.launch import launch

        return launch(plan, self.pool, replace_stale=replace_stale, **kw)

    def _attach_events(self, cluster_id: str, *, keep_failed: bool = False) -> AsyncIterator[Any]:
        from spark_tui.ops.attach import attach

        return attach(self.pool, cluster_id, keep_failed=keep_failed)

    def _watch_events(self, cluster_id: str | None, **kw: Any) -> AsyncIterator[Any]:
        from spark_tui.ops.watch import watch

        return watch(self.pool, cluster_id, **kw)

    async def _stop(self, cluster_id: str | None, emit: Emit | None) -> StopReport:
        from spark_tui.ops.cluster import stop

        return await stop(self.pool, cluster_id, emit=emit)

    async def _find_api(self) -> Any:
        from spark_tui.ops.attach import find_api

        return await find_api(self.pool)

    def _smoke_checks(self, target: ApiTarget, timeout: float) -> AsyncIterator[SmokeResult]:
        from spark_tui.ops.smoke import iter_smoke

        return iter_smoke(
            target.base_url,
            target.model,
            expect_reasoning=target.expect_reasoning,
            tool_call_parser=target.tool_call_parser,
            timeout=timeout,
        )

    def _bench_run(
        self,
        target: ApiTarget,
        config: BenchConfig,
        progress: Callable[[BenchProgress], None],
        on_level: Callable[[LevelResult], None],
    ) -> Any:
        """A `BenchRun` (anything with `run()` and a partial `result`)."""
        from spark_tui.ops.bench import BenchRun

        return BenchRun(target.base_url, target.model, config, progress=progress, on_level=on_level)

    def _model_sync_events(
        self, facts: Sequence[NodeFacts], recipe_name: str, needs: Sequence[Any], where: str
    ) -> AsyncIterator[Any]:
        from spark_tui.ops.model_sync import ModelSync

        run = ModelSync(
            self.pool,
            facts,
            recipe_name,
            env=self.sync_env(),
            where=where,
            local_cache=self.sync_cache,
        )
        return run.run(needs)

    def _image_sync_events(self, facts: Sequence[NodeFacts], image: str) -> AsyncIterator[Any]:
        from spark_tui.ops.image_sync import ImageSync

        return ImageSync(self.pool, facts, image).run()

    async def start(self) -> None:
        """Nothing to start for real nodes (the demo's session starts its simulated ones)."""

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()

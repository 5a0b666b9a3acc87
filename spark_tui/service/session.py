"""One cockpit or CLI run over the nodes: the nodes (see `service.nodes`), their facts, the
cluster it launched or attached to, and every user action as one async generator of typed
events.

Each action lives in its own module: `discover` (discover, probe), `evaluate`, `launch`,
`attach`, `stop`, `status`, `logs`, `watch`, `smoke`, `bench`, `tune`, `sync` (models,
image). A question to the user (trust a host key, replace stale containers, launch
although the fit check refuses) is a `Question` event the consumer answers.

Everything that reaches the nodes or the API goes through `Nodes`: the product's SSH nodes,
the demo's simulated ones, the tests' doubles; the rest runs the same over any of them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from spark_tui.core.timeouts import (
    FACTS_FRESH_S,
    READY_TIMEOUT_S,
    WATCH_INTERVAL_S,
    WATCH_REQUEST_TIMEOUT_S,
)
from spark_tui.service import events as ev
from spark_tui.service.api import ApiTarget, find_target, target_from_argv
from spark_tui.service.cluster import Cluster, SeenCluster, clusters_seen
from spark_tui.service.discover import discover, host_key_question
from spark_tui.service.endpoint import head_node, tunnel_command, tunnel_port
from spark_tui.service.pump import Ask, E, pump

# The evaluation (and with it the fit model and the plan) is imported where it is first
# used: the cockpit paints its first frame before it evaluates anything.
if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.core.fit import Finding
    from spark_tui.core.inventory import InventoryNode
    from spark_tui.core.plan import LaunchPlan
    from spark_tui.core.recipe import Recipe
    from spark_tui.core.sweep import Objective, Target
    from spark_tui.core.sweep_result import SweepResult
    from spark_tui.ops.bench import BenchConfig
    from spark_tui.ops.cluster import ClusterStatus
    from spark_tui.ops.history import History
    from spark_tui.service.evaluate import Evaluation
    from spark_tui.service.nodes import Nodes
    from spark_tui.service.prepared import Prepared
    from spark_tui.service.pump import Emit
    from spark_tui.service.status import ClusterReport

__all__ = ["LAUNCH_CODE", "READY_CODE", "ApiTarget", "Cluster", "Session", "target_from_argv"]

# What a launch loads beyond what discovery and the fit panel did, to make its containers:
# its action, its operations and their Docker client (see Session.load_launch).
LAUNCH_CODE = (
    "spark_tui.service.launch",
    "spark_tui.ops.launch",
    "spark_tui.ops.images",
    "spark_tui.service.history",
)
# ... and once its ranks run: the API's HTTP client and the history's records.
READY_CODE = ("httpx", "spark_tui.ops.history")


class Session:
    """The nodes of one run, their facts and our cluster on them (see module doc). Given
    an inventory it reaches the nodes over SSH; given `nodes`, through them."""

    # The CLI flags naming these nodes, for the remedies a sync gives (`models sync ...`).
    where: str = "--inventory FILE"
    # How the interface runs a sync, for the remedies of the gaps a launch finds (None:
    # the CLI's `models sync` / `images sync` for `where`).
    sync_hint: str | None = None

    def __init__(
        self,
        inventory: Sequence[InventoryNode] = (),
        *,
        nodes: Nodes | None = None,
        accept_new_host_keys: bool = False,
        history: History | None = None,
        open_history: Callable[[], History] | None = None,
        bench_config: BenchConfig | None = None,
        label: str | None = None,
        reattach_hint: str | None = None,
        unpicked: Sequence[str] | None = None,
        cluster_id: str | None = None,
    ) -> None:
        if nodes is None:
            from spark_tui.service.ssh_nodes import SshNodes

            nodes = SshNodes(inventory, accept_new_host_keys=accept_new_host_keys)
        self.nodes: Nodes = nodes
        self.accept_new_host_keys = accept_new_host_keys
        self._history = history
        self._open_history = open_history
        self._bench_config = bench_config
        self._label = label
        self.reattach_hint = reattach_hint or "`spark-tui` with the same --inventory or --hosts"
        self.facts: list[NodeFacts] = []
        self.errors: dict[str, tuple[str, str | None]] = {}
        # The mark (see probe_mark) of the probe the facts come from, and how many changes
        # to the nodes this session has made: facts from before a change are not reused.
        self._probed: tuple[float, int] | None = None
        self._changes = 0
        self.cluster: Cluster | None = None
        # The nodes a launch runs on, by name, head first (None: every reachable node, in
        # the inventory's order): the cockpit's nodes panel picks them.
        self.on: list[str] | None = None
        # The user's nodes this session was made without (`--on` picked the others; None:
        # no pick): the fit and the plan name them as left out.
        self.unpicked: list[str] | None = None if unpicked is None else list(unpicked)
        # Every node the user gave, in their order, picked or not (empty: the inventory's):
        # a cluster's tunnel port follows its head's place there, the same for every command.
        self.node_order: list[str] = []
        # The cluster of ours the actions act on when several run side by side (the CLI's
        # `--cluster ID`, the cockpit's choice); None: the only one (several is an error
        # naming them: an action never picks one on its own).
        self.chosen: str | None = cluster_id
        # Set when the user chose to leave the cluster running: an interrupted launch then
        # leaves its ranks too.
        self.keep_on_cancel = False
        self._ask: Ask | None = None
        self._prepared: Prepared | None = None

    # -- what the session holds ----------------------------------------------------------

    @property
    def inventory(self) -> list[InventoryNode]:
        return self.nodes.inventory

    def node_names(self) -> list[str]:
        """Every node the user gave, in their order (see `node_order`)."""
        return self.node_order or [n.name for n in self.inventory]

    @property
    def simulated(self) -> bool:
        return self.nodes.simulated

    @property
    def label(self) -> str:
        if self._label is not None:
            return self._label
        return f"{len(self.inventory)} nodes: " + ", ".join(n.name for n in self.inventory)

    @property
    def history(self) -> History:
        """The run history, opened when first used (its records load pydantic's models,
        which the cockpit's first frame does not need): `open_history()`, else the user's."""
        if self._history is None:
            if self._open_history is not None:
                self._history = self._open_history()
            else:
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

    @bench_config.setter
    def bench_config(self, config: BenchConfig) -> None:
        # The cockpit's bench dialog: later benchmarks (a tune's new baseline too) use it.
        self._bench_config = config

    @property
    def reachable(self) -> list[NodeFacts]:
        return [n for n in self.facts if n.name not in self.errors]

    def launch_nodes(self) -> tuple[list[NodeFacts], list[str] | None]:
        """The reachable nodes a launch runs on, head first, and the names of the user's
        nodes the pick leaves out (None: no pick; see core.selection). A picked node that
        is not reachable is left out."""
        from spark_tui.core.selection import pick_nodes

        reachable = self.reachable
        if self.on is None:
            return reachable, self.unpicked
        names = {n.name for n in reachable}
        picked, _others = pick_nodes(reachable, [n for n in self.on if n in names])
        used = {n.name for n in picked}
        left = [n.name for n in self.inventory if n.name not in used]
        return picked, [*(self.unpicked or ()), *left]

    def clusters_seen(self) -> list[SeenCluster]:
        """Our running clusters on the nodes as the last probe saw them, with the one this
        session launched or attached to since (see service.cluster.clusters_seen)."""
        return clusters_seen(self.reachable, self.cluster)

    def held_memory(self) -> dict[str, int]:
        """Memory our running clusters hold per node (a launch replacing them gets it back),
        each counted once (see service.evaluate.held_memory)."""
        from spark_tui.service.evaluate import held_memory

        cluster = self.cluster
        known = {}
        if cluster is not None and cluster.running:
            known[cluster.cluster_id] = ([n for _rank, n in cluster.ranks], cluster.utilization)
        return held_memory(self.reachable, known)

    async def load_launch(self, code: Sequence[str] = (*LAUNCH_CODE, *READY_CODE)) -> None:
        """Load the launch's code (LAUNCH_CODE, READY_CODE) in a worker thread. The cockpit
        does it while the user picks a recipe, so that its launch key starts containers
        rather than imports: they took a third of a second before the head's container
        started on a 2-core machine, over a second when it was busy. A headless launch
        loads LAUNCH_CODE while it connects and probes, READY_CODE once its ranks run."""
        import asyncio
        import importlib

        def load() -> None:
            for name in code:
                importlib.import_module(name)

        await asyncio.to_thread(load)

    def probe_mark(self) -> tuple[float, int]:
        """A mark taken as a probe begins; `probed(mark)` once its facts are kept."""
        return time.monotonic(), self._changes

    def probed(self, mark: tuple[float, int]) -> None:
        """The facts now held come from the probe that began at `mark`."""
        self._probed = mark

    def nodes_changed(self) -> None:
        """This session is changing the nodes (starting or removing containers, putting
        models or images on them): facts probed before are not reused for a launch."""
        self._changes += 1

    def facts_fresh(self, max_age: float = FACTS_FRESH_S) -> bool:
        """Whether a launch may act on the facts held instead of probing again: they come
        from a probe begun less than `max_age` seconds ago, with no change to the nodes
        since, every node answered it and none held a rank of ours (its memory is freed
        when it ends, by a stop or on its own)."""
        from spark_tui.ops.cluster import ROLE_LABEL
        from spark_tui.ops.image_flags import FLAG_TABLE_ROLE

        if self._probed is None or self.errors:
            return False
        started, changes = self._probed
        names = {n.name for n in self.facts}
        ranks = [
            c
            for n in self.facts
            for c in n.containers
            if c.labels.get(ROLE_LABEL) != FLAG_TABLE_ROLE
        ]
        return (
            changes == self._changes
            and time.monotonic() - started < max_age
            and all(n.name in names for n in self.inventory)
            and not ranks
        )

    def sync_env(self) -> dict[str, str]:
        """The environment the Hub is asked with (HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE)."""
        return self.nodes.sync_env()

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
        fetched so far: it never waits (`prepare` fetches what is missing), on the nodes
        picked (see `launch_nodes`)."""
        nodes, unpicked = self.launch_nodes()
        return self.prepared.assess(
            recipe,
            overrides,
            nodes,
            held=self.held_memory(),
            where=self.where,
            remedy=self.sync_hint,
            unpicked=unpicked,
        )

    async def prepare(
        self,
        recipe: Recipe,
        overrides: Mapping[str, Any],
        *,
        retry: bool = False,
        flags: bool = True,
        emit: Emit[ev.Notice] | None = None,
        wait_flags: bool = True,
    ) -> bool:
        """Fetch what `evaluate` needs and has not got: the model's facts from the Hub (in a
        worker thread) and the image's flag check of every rank. True when anything new
        came in; `retry`: ask again where the last answer was a failure; not `flags`: the
        Hub only (the flag check runs a container on the head, started here in the
        background all the same); `emit` gets a notice of what the Hub is asked and how
        long it may take, before it is asked; not `wait_flags`: a `flags_pending` note
        rather than waiting for the image's `--help=all` run (see Nodes.image_flags)."""

        async def check_flags(plan: LaunchPlan) -> list[Finding]:
            return await self.nodes.image_flags(plan, pull=False, emit=None, wait=wait_flags)

        self.start_flag_table(recipe, overrides)
        return await self.prepared.fetch(
            lambda: self.evaluate(recipe, overrides),
            self.launch_nodes()[0],
            check_flags if flags else None,
            retry=retry,
            waiting=None if emit is None else lambda text: emit(ev.Notice("info", text)),
        )

    def start_flag_table(self, recipe: Recipe, overrides: Mapping[str, Any] | None = None) -> None:
        """Start building the flag table of the recipe's image on the head in the
        background (`Nodes.start_flag_table`): the flag check then awaits a table built
        while the nodes are probed and the model's facts fetched (in the cockpit: while
        the user chooses), not after them. Its help run belongs to the cluster the launch
        of the recipe makes. With `overrides`, only when the evaluation has a plan to
        check (its head, its image, its cluster); without, the first node as the head and
        the cluster of every node picked (a launch on fewer nodes waits for it)."""
        from spark_tui.core.plan import default_cluster_id

        nodes = [n.name for n in self.inventory if n.name not in self.errors]
        if self.on is not None:
            nodes = [n for n in self.on if n in nodes]
        head = nodes[0] if nodes else None
        image = recipe.container
        cluster_id = default_cluster_id(recipe.name, nodes)
        if overrides is not None:
            evaluation = self.evaluate(recipe, overrides)
            plan = evaluation.plan
            if plan is None or evaluation.problem is not None:
                return  # no flag check will be made
            head, image, cluster_id = plan.head.node, plan.head.container.image, plan.cluster_id
        image = self.prepared.images.runs(image)  # a sentinel: its nightly, once resolved
        if head is not None and image:
            self.nodes.start_flag_table(head, image, cluster_id)

    def endpoint(
        self, cluster_id: str, head: str, api_port: int, local_port: int | None = None
    ) -> ev.Endpoint:
        """The API on `head` and the tunnel command for it from the inventory, to
        `local_port` on this machine (default: the API's own port)."""
        node = head_node(self.inventory, head)
        address = node.host if node else head
        local = local_port or tunnel_port(self.node_names(), head, api_port)
        tunnel = (
            tunnel_command(node, api_port, local)
            if node
            else f"ssh -N -L {local}:127.0.0.1:{api_port} {head}"
        )
        forward = (
            self.cluster.base_url
            if self.cluster and self.cluster.cluster_id == cluster_id
            else None
        )
        return ev.Endpoint(
            cluster_id=cluster_id,
            head=head,
            api_url=f"http://{address}:{api_port}/v1",
            local_url=forward,
            tunnel=tunnel,
            tunnel_port=local,
        )

    # -- connecting ------------------------------------------------------------------------

    async def start(self) -> None:
        """Bring up what the nodes need (the demo's simulated Sparks); real ones are up."""
        await self.nodes.start()

    async def connect(self, *, strict: bool = True) -> None:
        """Connect (again) to the nodes; `strict`: any unreachable node is an error (a
        launch, a stop or a status must not silently leave one out)."""
        await self.nodes.open(strict=strict, confirm=self.confirm_host_key)

    async def confirm_host_key(self, host: str, fingerprint: str) -> bool:
        """The host-key question to whoever consumes the running action (no without one)."""
        if self._ask is None:
            return False
        return await self._ask(host_key_question(host, fingerprint))

    async def close(self) -> None:
        await self.nodes.close()

    def _pumped(
        self, work: Callable[[Emit[E], Ask], Awaitable[Any]]
    ) -> AsyncIterator[E | ev.Question]:
        async def run(emit: Emit[E], ask: Ask) -> None:
            previous, self._ask = self._ask, ask
            try:
                await work(emit, ask)
            finally:
                self._ask = previous

        return pump(run)

    # -- the actions: each in its module, imported when first run (an action's operations
    # load HTTP, SSH and Docker clients the cockpit's first frame does not need) ------------

    def discover(self) -> AsyncIterator[ev.DiscoverEvent]:
        """Connect to every node (unknown host keys are questions) and probe them: Probed."""
        return self._pumped(lambda emit, ask: discover(self, emit))

    def probe(self) -> AsyncIterator[ev.DiscoverEvent]:
        """Probe again (reconnecting nodes that dropped): Probed."""
        return self._pumped(lambda emit, ask: discover(self, emit))

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
        ready_timeout: float = READY_TIMEOUT_S,
    ) -> AsyncIterator[ev.LaunchEvent]:
        """See `service.launch`. Raises LaunchFailed when a rank fails."""
        from spark_tui.service.launch import LaunchOptions, launch

        options = LaunchOptions(insist, replace, wait_ready, follow, keep_failed, ready_timeout)
        return self._pumped(
            lambda emit, ask: launch(self, emit, ask, recipe, dict(overrides), options)
        )

    async def running(self) -> ClusterStatus | None:
        """The running cluster of ours on the nodes, if there is exactly one."""
        from spark_tui.service.attach import running

        return await running(self)

    def attach(
        self, found: ClusterStatus, *, keep_failed: bool = False
    ) -> AsyncIterator[ev.AttachEvent]:
        """Follow a running cluster of ours like a launch (its logs, ready, failures: the
        other ranks stopped, unless `keep_failed`; see `service.attach`)."""
        from spark_tui.service.attach import attach

        return self._pumped(lambda emit, ask: attach(self, emit, found, keep_failed=keep_failed))

    def stop(
        self, cluster_id: str | None = None, *, every: bool = False
    ) -> AsyncIterator[ev.StopEvent]:
        """Remove every rank's container (of `cluster_id`, else of the chosen or only
        cluster, else of all ours with `every`) and check again that none is left:
        Stopped (see `service.stop`)."""
        from spark_tui.service.stop import stop

        return self._pumped(lambda emit, ask: stop(self, emit, cluster_id, every=every))

    async def status(self, cleanup: str | None = None) -> list[ClusterReport]:
        """Our clusters on the nodes, each with its endpoint, tunnel command and (when it
        is down) diagnosis; `cleanup` is the command a diagnosis names (see
        `service.status`)."""
        from spark_tui.service.status import status

        return await status(self, cleanup)

    def logs(
        self, *, rank: int | None = None, tail: int | None = None, follow: bool = False
    ) -> AsyncIterator[ev.LogsEvent]:
        """The ranks' logs, `tail` lines back (None: all), followed or not (see
        `service.logs`)."""
        from spark_tui.service.logs import logs

        return self._pumped(lambda emit, ask: logs(self, emit, rank=rank, tail=tail, follow=follow))

    def watch(
        self,
        cluster_id: str | None = None,
        *,
        interval: float = WATCH_INTERVAL_S,
        request_timeout: float = WATCH_REQUEST_TIMEOUT_S,
        cleanup: str | None = None,
        keep_failed: bool = False,
    ) -> AsyncIterator[ev.WatchEvent]:
        """Watch a ready cluster until a rank fails, then stop its ranks unless
        `keep_failed` (see `service.watch`)."""
        from spark_tui.service.watch import watch

        return self._pumped(
            lambda emit, ask: watch(
                self,
                emit,
                cluster_id,
                interval=interval,
                request_timeout=request_timeout,
                cleanup=cleanup,
                keep_failed=keep_failed,
            )
        )

    def smoke(
        self, *, base_url: str | None = None, model: str | None = None, **kw: Any
    ) -> AsyncIterator[ev.SmokeEvent]:
        """The smoke checks of the API (see `service.smoke`)."""
        from spark_tui.service.smoke import smoke

        return self._pumped(
            lambda emit, ask: smoke(self, emit, base_url=base_url, model=model, **kw)
        )

    def bench(
        self,
        config: BenchConfig | None = None,
        *,
        base_url: str | None = None,
        model: str | None = None,
    ) -> AsyncIterator[ev.BenchEvent]:
        """A benchmark of the API (see `service.bench`)."""
        from spark_tui.service.bench import bench

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
        keep_failed: bool = False,
    ) -> AsyncIterator[ev.TuneEvent]:
        """One change, measured against the baseline; a failed relaunch brings the settings
        it replaced back, asked, unless `keep_failed` (see `service.tune`)."""
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
                keep_failed=keep_failed,
            )
        )

    def restore_after_tune(
        self, recipe: Recipe, replaced: ev.TuneReplaced, reason: str
    ) -> AsyncIterator[ev.TuneEvent]:
        """After a tune's relaunch was interrupted (`reason`): the settings it replaced (of
        `recipe`) run again (see `service.tune.restore`)."""
        from spark_tui.service.tune import restore

        return self._pumped(
            lambda emit, ask: restore(
                self, emit, ask, recipe, dict(replaced.overrides), replaced.change, reason
            )
        )

    def sweep(
        self,
        recipe: Recipe,
        setting: str,
        values: Sequence[str],
        targets: Sequence[Target] = (),
        objective: Objective | None = None,
        *,
        resume: bool = False,
        apply_best: bool = False,
        baseline: str | None = None,
        new_baseline: bool = False,
        on_result: Callable[[SweepResult], None] | None = None,
    ) -> AsyncIterator[ev.SweepEvent]:
        """Each value of one setting measured against one baseline, judged against the
        targets (resumed without targets or objective: the sweep's own); the best value
        left running with `apply_best`, else the baseline's settings (see `service.sweep`)."""
        from spark_tui.service.sweep import LEAVE_BASELINE, LEAVE_BEST, sweep

        return self._pumped(
            lambda emit, ask: sweep(
                self,
                emit,
                ask,
                recipe,
                setting,
                values,
                targets,
                objective,
                resume=resume,
                leave_at_end=LEAVE_BEST if apply_best else LEAVE_BASELINE,
                baseline=baseline,
                new_baseline=new_baseline,
                on_result=on_result,
            )
        )

    def leave_after_sweep(
        self, recipe: Recipe, result: SweepResult, choice: str
    ) -> AsyncIterator[ev.SweepEvent]:
        """After a sweep (an interrupted one too): leave `choice` running, one of best,
        baseline, nothing (see `service.sweep.leave`)."""
        from spark_tui.service.sweep import leave

        return self._pumped(lambda emit, ask: leave(self, emit, ask, recipe, result, choice))

    def sync_models(
        self,
        recipe: Recipe,
        overrides: Mapping[str, Any] | None = None,
        *,
        where: str = "--inventory FILE",
        probe_after: bool = False,
    ) -> AsyncIterator[ev.SyncEvent]:
        """The recipe's model and draft model on every node: downloaded once, copied node
        to node. `where` (the CLI flags naming the nodes) goes into remedies."""
        from spark_tui.service.sync import sync_models

        return self._pumped(
            lambda emit, ask: sync_models(
                self, emit, recipe, overrides or {}, where=where, probe_after=probe_after
            )
        )

    def sync_image(
        self, recipe: Recipe, *, probe_after: bool = False
    ) -> AsyncIterator[ev.SyncEvent]:
        """The head's image of the recipe on every node: pulled, else copied node to node."""
        from spark_tui.service.sync import sync_image

        return self._pumped(
            lambda emit, ask: sync_image(self, emit, recipe, probe_after=probe_after)
        )

    async def api_target(self, base_url: str | None, model: str | None) -> ApiTarget:
        """The API to measure (see `service.api.find_target`)."""
        return await find_target(self, base_url, model)

"""Ask a node's image which flags its `vllm serve` accepts, once per image id.

A recipe flag the container's vLLM does not know fails minutes into a launch, after the
image pull and the imports. Before that, `check` and `launch` run `vllm serve --help=all` in
the image on the head (a throwaway container, no network), keep the text on this machine
under the image's id (platformdirs' user cache: the same id is the same vLLM), and make each
unknown flag or value outside a flag's choices a blocking finding naming the flag and the
image. `launch` refuses such a plan before any container is created (see `refusal`) when
the table is at hand. On a first launch of an image the table's `--help=all` run (tens of
seconds of imports) may still be under way when everything else is ready: `wait=False` then
gives a PENDING note and the launch may start its ranks beside it, because the run's
container is the launch's own (named `spark-tui-<cluster>-flags`, labelled with the
cluster and the `flag-table` role, so `stop` removes it) and is removed when its build is
cancelled (`FlagTables.abandon`, `FlagTables.close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_tui.core.errors import OperationFailed, SparkError
from spark_tui.core.fit import Finding
from spark_tui.core.plan import LABEL_PREFIX
from spark_tui.core.serve_flags import FlagTable, describe, parse_help
from spark_tui.ops.events import Emit, Notice

HELP_TIMEOUT = 300.0
HELP_CALL = "vllm serve --help=all"
HELP_CREATE = "create the vllm serve --help=all container"  # the Docker call that makes it
GIVE_UP_WAIT_S = 10.0  # how long a given-up build that made no container yet is let end
HELP_POLL_S = 0.25  # how often the help run's container is asked whether it has ended
_ID = re.compile(r"^sha256:[0-9a-f]{64}$")
# The codes of the findings this module makes: blocking ones, and the notes that say the
# check could not be made (the image is not on the head yet; the image could not be asked).
BLOCKING_CODES = ("unknown_flag", "flag_value")
NOT_PULLED = "image_not_pulled"
NOT_CHECKED = "flags_not_checked"
PENDING = "flags_pending"
# The role label of the help run's container (a rank's is head or worker).
FLAG_TABLE_ROLE = "flag-table"


class ImageNotPulled(SparkError):
    """The image is not on the head, so its flags cannot be read yet."""


class TablePending(Exception):
    """The image's flag table needs its `vllm serve --help=all` run, which is under way."""


def help_container_name(cluster_id: str) -> str:
    """The name of the help run's container of a cluster (its ranks' are `...-rN`)."""
    return f"spark-tui-{cluster_id}-flags"


def help_labels(cluster_id: str, head: str) -> dict[str, str]:
    """The help run's container labels: the cluster's, so `stop` finds it; its role says
    it is no rank (status and the stale check leave it out)."""
    return {
        LABEL_PREFIX + "cluster": cluster_id,
        LABEL_PREFIX + "role": FLAG_TABLE_ROLE,
        LABEL_PREFIX + "node": head,
    }


def cache_dir() -> Path:
    """Where the help texts are kept on the control machine (under $SPARK_TUI_CACHE_DIR
    when set, as the Hub cache)."""
    import os

    from platformdirs import user_cache_dir

    base = os.environ.get("SPARK_TUI_CACHE_DIR") or user_cache_dir("spark-tui")
    return Path(base) / "vllm-serve-help"


def _cache_file(image_id: str) -> Path | None:
    if not _ID.match(image_id):
        return None
    return cache_dir() / f"{image_id[7:]}.txt"


def cached_help(image_id: str) -> str | None:
    path = _cache_file(image_id)
    if path is None or not path.is_file():
        return None
    return path.read_text(encoding="utf-8")


def store_help(image_id: str, text: str) -> None:
    path = _cache_file(image_id)
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _help_failed(image: str, stderr: bytes) -> SparkError:
    tail = " | ".join(stderr.decode("utf-8", "replace").strip().splitlines()[-2:])
    return SparkError(
        f"`vllm serve --help=all` failed in {image}: {tail or 'no output'}",
        "check that the image runs vLLM (`docker run --rm IMAGE vllm --version`)",
    )


async def run_help(
    docker: Any,
    image: str,
    name: str,
    labels: Mapping[str, str],
    making: Callable[[], None] | None = None,
    may_run: Callable[[], bool] | None = None,
    turn: Callable[[], Awaitable[None]] | None = None,
) -> str:
    """`vllm serve --help=all` in a throwaway container `name` of `image` (stdout only);
    `making` is called once the container is being made (from then on it is removed
    however this ends); `may_run` false once it exists: it is not started; `turn` is
    awaited before it is started (see FlagTables.ranks_first).

    The container is removed however this ends: cancelled too (a Ctrl+C of the launch it
    runs beside), where the thread making it cannot be recalled: the removal waits for
    that thread first."""
    import docker as docker_sdk

    def leftover_of_ours(c: Any) -> None:
        # A process killed outright leaves its help container; ours by its role.
        try:
            old = c.api.inspect_container(name)
        except docker_sdk.errors.NotFound:
            return
        if (old.get("Config") or {}).get("Labels", {}).get(LABEL_PREFIX + "role") == (
            FLAG_TABLE_ROLE
        ):
            c.api.remove_container(name, force=True)

    def create(c: Any) -> str:
        leftover_of_ours(c)
        created = c.api.create_container(
            image,
            ["serve", "--help=all"],
            name=name,
            entrypoint=["vllm"],
            environment={"COLUMNS": "200", "HF_HUB_OFFLINE": "1"},
            labels=dict(labels),
            host_config=c.api.create_host_config(network_mode="none"),
        )
        return str(created["Id"])

    def output(c: Any) -> tuple[bytes, bytes]:
        return c.api.logs(name, stdout=True, stderr=False), c.api.logs(
            name, stdout=False, stderr=True
        )

    async def run() -> tuple[int, bytes, bytes]:
        # Polled, not waited for in a thread: a thread blocked in Docker's wait would hold
        # one of the few the event loop has until the run ends, and the removals of an
        # interrupted launch would queue behind such threads.
        if turn is not None:
            await turn()
        await docker.call(lambda c: c.api.start(name), HELP_CALL)
        deadline = time.monotonic() + HELP_TIMEOUT
        while True:
            info = await docker.inspect(name)
            if info is None:
                raise SparkError(
                    f"the `vllm serve --help=all` container of {image} was removed while it ran",
                    "launch again (its flags are checked then)",
                )
            state = info.get("State") or {}
            if not state.get("Running") and state.get("Status") != "created":
                break
            if time.monotonic() > deadline:
                raise SparkError(
                    f"`vllm serve --help=all` in {image} did not end within {HELP_TIMEOUT:.0f} s",
                    "check the head's load, or run it by hand: "
                    "`docker run --rm --entrypoint vllm IMAGE serve --help=all`",
                )
            await asyncio.sleep(HELP_POLL_S)
        out, err = await docker.call(output, "logs of vllm serve --help=all")
        return int(state.get("ExitCode", 1)), out, err

    def remove(c: Any) -> None:
        try:
            c.api.remove_container(name, force=True)
        except docker_sdk.errors.NotFound:
            pass

    async def removed() -> None:
        await asyncio.wait({creating})
        if creating.cancelled() or creating.exception() is not None:
            return
        await docker.call(remove, f"rm {name}")

    creating = asyncio.ensure_future(docker.call(create, HELP_CREATE))
    try:
        if making is not None:
            # Before the container exists: making one of a large image took a second on
            # a busy head, and a launch only needs to know that the run is under way and
            # that its container goes with the launch's ranks (the removal below).
            making()
        await asyncio.shield(creating)
        if may_run is not None and not may_run():
            raise SparkError(
                f"the flag check of {image} was given up before it ran",
                "launch again (its flags are checked then)",
            )
        ran = await run()
    finally:
        removal = asyncio.ensure_future(removed())
        try:
            await asyncio.shield(removal)
        except SparkError:
            pass  # gone with its node's connection: `stop` names and removes it
        except asyncio.CancelledError:
            # Interrupted again while removing: the removal still runs to its end.
            await asyncio.wait({removal})
            raise
    code, out, err = ran
    if code != 0:
        raise _help_failed(image, err)
    return out.decode("utf-8", "replace")


async def image_flag_table(
    docker: Any,
    image: str,
    *,
    pull: bool = False,
    emit: Emit[Notice] | None = None,
    owner: str | None = None,
    helping: Callable[[], None] | None = None,
    may_run: Callable[[], bool] | None = None,
    turn: Callable[[], Awaitable[None]] | None = None,
) -> tuple[FlagTable, str]:
    """The flag table of `image` on the node behind `docker` (a RemoteDocker), and the
    image id it is cached under. A missing image is pulled when `pull` (its progress lines
    as notices to `emit`), else ImageNotPulled; SparkError when the image fails to answer.
    The help run's container belongs to cluster `owner` when given (see help_labels);
    `helping` is called once it is being made (the text was not cached); `may_run` false:
    no container is made or started (SparkError: the build was given up meanwhile); `turn`
    is awaited before the help container starts."""
    info = await docker.image(image)
    if (info is None or not info.id) and pull:

        def say(text: str) -> None:
            if emit is not None:
                emit(Notice("info", f"{docker.node}: {text}"))

        say(f"pulling {image} (its vLLM's flags are checked before launch)")
        info = await docker.pull(image, say)
    if info is None or not info.id:
        raise ImageNotPulled(
            f"{image} is not on {docker.node} yet, so its flags were not checked",
            "pull it (the launch does) and run check again",
        )
    text = cached_help(info.id)
    if text is None:
        if may_run is not None and not may_run():
            raise SparkError(
                f"the flag check of {image} was given up before it ran",
                "launch again (its flags are checked then)",
            )
        if owner is not None:
            name, labels = help_container_name(owner), help_labels(owner, docker.node)
        else:  # `check`: no cluster; its own process removes it
            name = f"spark-tui-flags-{info.id[7:19]}"
            labels = {LABEL_PREFIX + "role": FLAG_TABLE_ROLE, LABEL_PREFIX + "node": docker.node}
        text = await run_help(docker, image, name, labels, helping, may_run, turn)
        parse_help(text)  # refuse to cache what is not help text
        store_help(info.id, text)
    return parse_help(text), info.id


async def _build_table(
    pool: Any,
    head: str,
    image: str,
    pull: bool,
    emit: Emit[Notice] | None,
    owner: str | None,
    helping: Callable[[], None],
    may_run: Callable[[], bool],
    turn: Callable[[], Awaitable[None]] | None = None,
) -> tuple[FlagTable, str]:
    """image_flag_table over its own Docker connection to the head."""
    from spark_tui.remote.docker_remote import RemoteDocker

    docker = await RemoteDocker.open(pool[head])
    try:
        return await image_flag_table(
            docker,
            image,
            pull=pull,
            emit=emit,
            owner=owner,
            helping=helping,
            may_run=may_run,
            turn=turn,
        )
    finally:
        await docker.close()


@dataclass
class _Build:
    """One flag table build under way: the cluster its help container belongs to, and
    whether it turned out to need that `--help=all` run (False: cached, or it ended)."""

    task: asyncio.Task[tuple[FlagTable, str]]
    runs_help: asyncio.Future[bool]
    owner: str | None
    given_up: bool = False  # no help container may be made any more
    # Another cluster's launch waits for this table: its help run is not held for it.
    awaited: bool = False


class FlagTables:
    """The flag table builds under way over one pool, one per head and image: `start`
    begins a build in the background as soon as the image is known (no pull), and whoever
    needs the table (`get`) joins that build instead of starting another. So the image's
    `vllm serve --help=all` (tens of seconds on a first launch of an image) runs while the
    nodes are probed and the fit is evaluated, instead of after them; once done, the text
    is kept on this machine per image id (a later build reads it back: the image under a
    tag may have changed meanwhile). `abandon` and `close` cancel builds and wait until
    their help containers are removed. Until a launch has started its ranks (`hold`, from
    the launch's beginning; `ranks_first` around the ranks' start), a help container waits
    to start: its imports take both cores of a small head, and the ranks' start is the
    launch's own time."""

    _of: weakref.WeakKeyDictionary[Any, FlagTables] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self._builds: dict[tuple[str, str], _Build] = {}
        self._starting = 0  # holds taken by launches that have not started their ranks
        self._changed: asyncio.Event | None = None  # set (and replaced) when a hold ends

    def hold(self) -> Callable[[], None]:
        """Hold every help container of these builds from starting (one started before
        runs on) until the returned call (later calls do nothing): a launch holds them
        from its beginning until its ranks have started, however it ends. A build
        another cluster's launch waits for is not held (that launch would wait for ever)."""
        self._starting += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._starting -= 1
            self._poke()

        return release

    def _poke(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def ranks_first(self) -> contextlib.AbstractAsyncContextManager[None]:
        """While inside, no help container of these builds starts (see `hold`): the
        launch's ranks are made and started first."""
        return self._holding()

    @contextlib.asynccontextmanager
    async def _holding(self) -> AsyncIterator[None]:
        release = self.hold()
        try:
            yield
        finally:
            release()

    async def ranks_started(self, build: _Build | None = None) -> None:
        """Return once no launch holds the help runs (see `hold`), or `build`'s table is
        awaited by another cluster's launch."""
        while self._starting and not (build is not None and build.awaited):
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()

    @classmethod
    def of(cls, pool: Any) -> FlagTables:
        """The builds over `pool` (they live as long as it does)."""
        tables = cls._of.get(pool)
        if tables is None:
            tables = cls._of[pool] = FlagTables()
        return tables

    def _launch(
        self,
        pool: Any,
        head: str,
        image: str,
        pull: bool,
        emit: Emit[Notice] | None,
        owner: str | None,
    ) -> _Build:
        key = (head, image)
        runs_help: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def decided(answer: bool) -> None:
            if not runs_help.done():
                runs_help.set_result(answer)

        def may_run() -> bool:
            return not build.given_up

        async def turn() -> None:
            await self.ranks_started(build)

        work = _build_table(
            pool, head, image, pull, emit, owner, lambda: decided(True), may_run, turn
        )
        build = _Build(asyncio.ensure_future(work), runs_help, owner)

        def done(t: asyncio.Task[tuple[FlagTable, str]]) -> None:
            decided(False)
            if self._builds.get(key) is build:
                del self._builds[key]
            if not t.cancelled():
                t.exception()  # a build nobody awaits (the launch went elsewhere) stays quiet

        build.task.add_done_callback(done)
        self._builds[key] = build
        return build

    def start(self, pool: Any, head: str, image: str, owner: str | None = None) -> None:
        """Build the table of `image` on `head` in the background (its help container
        belonging to cluster `owner`), unless a build of it is under way."""
        if (head, image) not in self._builds:
            self._launch(pool, head, image, False, None, owner)

    async def get(
        self,
        pool: Any,
        head: str,
        image: str,
        *,
        pull: bool = False,
        emit: Emit[Notice] | None = None,
        owner: str | None = None,
        wait: bool = True,
    ) -> tuple[FlagTable, str]:
        """The table of `image` on `head` (see image_flag_table): the build under way, else
        a new one for `owner` (with `pull`, a missing image is pulled first). Not `wait`:
        TablePending as soon as the build turns out to need the image's `--help=all` run
        in a container of cluster `owner` (the run goes on); a run in another cluster's
        container is waited for, since `owner`'s launch could not remove it."""
        build = self._builds.get((head, image)) or self._launch(
            pool, head, image, pull, emit, owner
        )
        if build.owner != owner and not build.awaited:
            build.awaited = True  # waited for below: not held for a launch (see `hold`)
            self._poke()
        try:
            return await self._result(build, image, wait or build.owner != owner)
        except ImageNotPulled:
            if not pull:
                raise
            # The background build found no image (it never pulls): pull it now.
            build = self._launch(pool, head, image, pull, emit, owner)
            return await self._result(build, image, wait)

    @staticmethod
    async def _result(build: _Build, image: str, wait: bool) -> tuple[FlagTable, str]:
        if not wait:
            either: set[asyncio.Future[Any]] = {build.task, build.runs_help}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not build.task.done():
                raise TablePending(image)
        return await asyncio.shield(build.task)

    async def abandon(self, owner: str) -> None:
        """Give up the builds whose help container belongs to cluster `owner` (its launch
        failed or was interrupted) and wait until their containers are removed."""
        await self._give_up([b for b in self._builds.values() if b.owner == owner])

    async def close(self) -> None:
        """Give up every build under way and wait until their containers are removed (the
        pool closes next: a container left then would stay on the head)."""
        await self._give_up(list(self._builds.values()))

    @staticmethod
    async def _give_up(builds: Sequence[_Build]) -> None:
        """A build running its help container is cancelled (the container is removed);
        one that has not got that far makes none now and is let end: cancelling it would
        leave its Docker call running in a thread, which may outlive the pool's
        connections and hold the process at exit. One still not ended after a while (a
        pull) is cancelled all the same."""
        for build in builds:
            build.given_up = True
        running = [b for b in builds if b.runs_help.done() and b.runs_help.result()]
        for build in running:
            build.task.cancel()
        others = {b.task for b in builds if b not in running}
        if others:
            _done, late = await asyncio.wait(others, timeout=GIVE_UP_WAIT_S)
            for task in late:
                task.cancel()
        if builds:
            await asyncio.wait({b.task for b in builds})


def start_flag_table(pool: Any, head: str, image: str, owner: str | None = None) -> None:
    """Start building the flag table of `image` on `head` in the background (FlagTables)."""
    FlagTables.of(pool).start(pool, head, image, owner)


def flag_findings(table: FlagTable, argv: list[str], image: str) -> list[Finding]:
    """A blocking finding per flag the image's vLLM would refuse."""
    out = []
    for problem in table.check(argv):
        message, remedy = describe(problem, image)
        code = "unknown_flag" if problem.kind == "unknown" else "flag_value"
        out.append(Finding("error", code, message, remedy))
    return out


def _argvs(argvs: Sequence[Sequence[str]] | Sequence[str]) -> list[list[str]]:
    if argvs and isinstance(argvs[0], str):
        return [[str(w) for w in argvs]]
    return [[str(w) for w in a] for a in argvs]


async def check_image_flags(
    pool: Any,
    head: str,
    image: str,
    argvs: Sequence[Sequence[str]] | Sequence[str],
    *,
    pull: bool = False,
    emit: Emit[Notice] | None = None,
    mods: Sequence[str] = (),
    owner: str | None = None,
    wait: bool = True,
) -> list[Finding]:
    """The findings of the flag check on the head's image for one argv or several (each
    rank's; a problem is reported once). An info finding when the check could not be made:
    the fit verdict stands on its own then. `pull`: pull a missing image, its progress to
    `emit` (see image_flag_table); `mods`: the recipe's mods, whose flags the serve command may use;
    `owner`: the cluster a help run's container belongs to; not `wait`: a PENDING note
    instead of waiting for the image's `--help=all` run in `owner`'s container."""
    import docker as docker_sdk

    try:
        table, _image_id = await FlagTables.of(pool).get(
            pool, head, image, pull=pull, emit=emit, owner=owner, wait=wait
        )
    except TablePending:
        return [
            Finding(
                "info",
                PENDING,
                f"the flags of {image} are being read from its vLLM on {head} (a first "
                "launch of this image)",
                "nothing to do: later launches of this image check at once",
            )
        ]
    except ImageNotPulled as exc:
        return [Finding("info", NOT_PULLED, exc.message, exc.remedy)]
    except SparkError as exc:
        return [Finding("info", NOT_CHECKED, exc.message, exc.remedy)]
    except docker_sdk.errors.DockerException as exc:
        return [
            Finding(
                "info",
                NOT_CHECKED,
                f"{image} on {head} could not be asked for its flags: {exc}",
                "run `docker run --rm --entrypoint vllm IMAGE serve --help=all` on the head",
            )
        ]
    return argvs_findings(table.with_mods(mods), argvs, image)


def argvs_findings(
    table: FlagTable, argvs: Sequence[Sequence[str]] | Sequence[str], image: str
) -> list[Finding]:
    """flag_findings of one argv or several (each rank's), each problem once."""
    out: list[Finding] = []
    for argv in _argvs(argvs):
        for f in flag_findings(table, argv, image):
            if f not in out:
                out.append(f)
    return out


def serve_argvs(plan: Any) -> list[list[str]]:
    """The `vllm serve` argvs a LaunchPlan runs: every rank's (the workers' carry flags the
    plan adds, like --headless), or the one vllm-ray execs in the head once Ray is up."""
    out = []
    for argv in [r.argv for r in plan.ranks] + [plan.serve_exec or []]:
        words = [str(w) for w in argv]
        if len(words) >= 2 and words[0].rsplit("/", 1)[-1] == "vllm" and words[1] == "serve":
            if words not in out:
                out.append(words)
    return out


async def plan_flag_findings(
    pool: Any,
    plan: Any,
    *,
    pull: bool = False,
    emit: Emit[Notice] | None = None,
    wait: bool = True,
) -> list[Finding]:
    """The flag check of a LaunchPlan against its image on the head (see check_image_flags);
    a help run it starts belongs to the plan's cluster."""
    argvs = serve_argvs(plan)
    if not argvs:
        return []
    head = plan.head
    return await check_image_flags(
        pool,
        head.node,
        head.container.image,
        argvs,
        pull=pull,
        emit=emit,
        mods=head.mods,
        owner=plan.cluster_id,
        wait=wait,
    )


def refusal(
    findings: Sequence[Finding], recipe: str, image: str, *, started: bool = False
) -> OperationFailed | None:
    """The launch refusal the blocking flag findings make (None when there is none);
    `started`: the ranks had started beside the check (they were stopped and removed).

    It is not a question to insist on: argparse refuses these words before the engine
    starts (exit 2, `unrecognized arguments` / `invalid choice`), so every rank would only
    fail at once; --force does not skip it."""
    blocking = [f for f in findings if f.severity == "error" and f.code in BLOCKING_CODES]
    if not blocking:
        return None
    when = (
        "refused (its ranks, started while the image's flags were read, were stopped and removed)"
        if started
        else "refused before any container was created"
    )
    return OperationFailed(
        f"launch of {recipe} {when}: " + "; ".join(f.message for f in blocking),
        "; ".join(dict.fromkeys(f.remedy for f in blocking))
        + f" (--force does not skip this: the vLLM in {image} exits at once, code 2)",
    )


def check_image_flags_sync(
    inventory: Any,
    head: str,
    image: str,
    argv: Sequence[Sequence[str]] | Sequence[str],
    mods: Sequence[str] = (),
    **pool_options: Any,
) -> list[Finding]:
    """check_image_flags for the headless CLI: its own short-lived connection to the head."""
    from spark_tui.remote.ssh import ConnectionPool

    async def go() -> list[Finding]:
        nodes = [n for n in inventory if n.name == head] or list(inventory)[:1]
        pool = ConnectionPool(nodes, **pool_options)
        failures = await pool.open(partial=True)
        try:
            if head in failures:
                exc = failures[head]
                return [Finding("info", NOT_CHECKED, exc.message, exc.remedy)]
            return await check_image_flags(pool, nodes[0].name, image, argv, mods=mods)
        finally:
            await pool.close()

    return asyncio.run(go())

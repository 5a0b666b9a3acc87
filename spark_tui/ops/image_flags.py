"""Ask a node's image which flags its `vllm serve` accepts, once per image id.

A recipe flag the container's vLLM does not know fails minutes into a launch, after the
image pull and the imports. Before that, `check` and `launch` run `vllm serve --help=all` in
the image on the head (a throwaway container, no network), keep the text on this machine
under the image's id (platformdirs' user cache: the same id is the same vLLM), and make each
unknown flag or value outside a flag's choices a blocking finding naming the flag and the
image. `launch` refuses such a plan before any container is created (see `refusal`).
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spark_tui.core.errors import OperationFailed, SparkError
from spark_tui.core.fit import Finding
from spark_tui.core.serve_flags import FlagTable, describe, parse_help
from spark_tui.ops.events import Emit, Notice

HELP_TIMEOUT = 300.0
_ID = re.compile(r"^sha256:[0-9a-f]{64}$")
# The codes of the findings this module makes: blocking ones, and the notes that say the
# check could not be made (the image is not on the head yet; the image could not be asked).
BLOCKING_CODES = ("unknown_flag", "flag_value")
NOT_PULLED = "image_not_pulled"
NOT_CHECKED = "flags_not_checked"


class ImageNotPulled(SparkError):
    """The image is not on the head, so its flags cannot be read yet."""


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


def _run_help(client: Any, image: str) -> str:
    """`vllm serve --help=all` in a throwaway container of `image` (stdout only)."""
    import docker

    container = client.containers.run(
        image,
        ["serve", "--help=all"],
        entrypoint=["vllm"],
        environment={"COLUMNS": "200", "HF_HUB_OFFLINE": "1"},
        network_mode="none",
        labels={"org.spark-tui.purpose": "flag-table"},
        detach=True,
    )
    try:
        result = container.wait(timeout=HELP_TIMEOUT)
        logs: bytes = container.logs(stdout=True, stderr=False)
        out = logs.decode("utf-8", "replace")
        if int(result.get("StatusCode", 1)) != 0:
            err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
            tail = " | ".join(err.strip().splitlines()[-2:])
            raise SparkError(
                f"`vllm serve --help=all` failed in {image}: {tail or 'no output'}",
                "check that the image runs vLLM (`docker run --rm IMAGE vllm --version`)",
            )
        return out
    finally:
        try:
            container.remove(force=True)
        except docker.errors.APIError:
            pass


async def image_flag_table(
    docker: Any, image: str, *, pull: bool = False, emit: Emit[Notice] | None = None
) -> tuple[FlagTable, str]:
    """The flag table of `image` on the node behind `docker` (a RemoteDocker), and the
    image id it is cached under. A missing image is pulled when `pull` (its progress lines
    as notices to `emit`), else ImageNotPulled; SparkError when the image fails to answer."""
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
        text = await docker.call(lambda c: _run_help(c, image), "vllm serve --help=all")
        parse_help(text)  # refuse to cache what is not help text
        store_help(info.id, text)
    return parse_help(text), info.id


async def _build_table(
    pool: Any, head: str, image: str, pull: bool, emit: Emit[Notice] | None
) -> tuple[FlagTable, str]:
    """image_flag_table over its own Docker connection to the head."""
    from spark_tui.remote.docker_remote import RemoteDocker

    docker = await RemoteDocker.open(pool[head], timeout=HELP_TIMEOUT + 30)
    try:
        return await image_flag_table(docker, image, pull=pull, emit=emit)
    finally:
        await docker.close()


class FlagTables:
    """The flag table builds under way over one pool, one per head and image: `start`
    begins a build in the background as soon as the image is known (no pull), and whoever
    needs the table (`get`) joins that build instead of starting another. So the image's
    `vllm serve --help=all` (tens of seconds on a first launch of an image) runs while the
    nodes are probed and the fit is evaluated, instead of after them; once done, the text
    is kept on this machine per image id (a later build reads it back: the image under a
    tag may have changed meanwhile)."""

    _of: weakref.WeakKeyDictionary[Any, FlagTables] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self._builds: dict[tuple[str, str], asyncio.Task[tuple[FlagTable, str]]] = {}

    @classmethod
    def of(cls, pool: Any) -> FlagTables:
        """The builds over `pool` (they live as long as it does)."""
        tables = cls._of.get(pool)
        if tables is None:
            tables = cls._of[pool] = FlagTables()
        return tables

    def _launch(
        self, pool: Any, head: str, image: str, pull: bool, emit: Emit[Notice] | None
    ) -> asyncio.Task[tuple[FlagTable, str]]:
        key = (head, image)
        task = asyncio.ensure_future(_build_table(pool, head, image, pull, emit))

        def done(t: asyncio.Task[tuple[FlagTable, str]]) -> None:
            if self._builds.get(key) is t:
                del self._builds[key]
            if not t.cancelled():
                t.exception()  # a build nobody awaits (the launch went elsewhere) stays quiet

        task.add_done_callback(done)
        self._builds[key] = task
        return task

    def start(self, pool: Any, head: str, image: str) -> None:
        """Build the table of `image` on `head` in the background, unless a build of it
        is under way."""
        if (head, image) not in self._builds:
            self._launch(pool, head, image, False, None)

    async def get(
        self,
        pool: Any,
        head: str,
        image: str,
        *,
        pull: bool = False,
        emit: Emit[Notice] | None = None,
    ) -> tuple[FlagTable, str]:
        """The table of `image` on `head` (see image_flag_table): the build under way, else
        a new one (with `pull`, a missing image is pulled first)."""
        task = self._builds.get((head, image)) or self._launch(pool, head, image, pull, emit)
        try:
            return await asyncio.shield(task)
        except ImageNotPulled:
            if not pull:
                raise
            # The background build found no image (it never pulls): pull it now.
            return await asyncio.shield(self._launch(pool, head, image, pull, emit))


def start_flag_table(pool: Any, head: str, image: str) -> None:
    """Start building the flag table of `image` on `head` in the background (FlagTables)."""
    FlagTables.of(pool).start(pool, head, image)


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
) -> list[Finding]:
    """The findings of the flag check on the head's image for one argv or several (each
    rank's; a problem is reported once). An info finding when the check could not be made:
    the fit verdict stands on its own then. `pull`: pull a missing image, its progress to
    `emit` (see image_flag_table); `mods`: the recipe's mods, whose flags the serve command may use."""
    import docker as docker_sdk

    try:
        table, _image_id = await FlagTables.of(pool).get(pool, head, image, pull=pull, emit=emit)
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
    pool: Any, plan: Any, *, pull: bool = False, emit: Emit[Notice] | None = None
) -> list[Finding]:
    """The flag check of a LaunchPlan against its image on the head (see check_image_flags)."""
    argvs = serve_argvs(plan)
    if not argvs:
        return []
    head = plan.head
    return await check_image_flags(
        pool, head.node, head.container.image, argvs, pull=pull, emit=emit, mods=head.mods
    )


def refusal(findings: Sequence[Finding], recipe: str, image: str) -> OperationFailed | None:
    """The launch refusal the blocking flag findings make (None when there is none).

    It is not a question to insist on: argparse refuses these words before the engine
    starts (exit 2, `unrecognized arguments` / `invalid choice`), so every rank would only
    fail at once; --force does not skip it."""
    blocking = [f for f in findings if f.severity == "error" and f.code in BLOCKING_CODES]
    if not blocking:
        return None
    return OperationFailed(
        f"launch of {recipe} refused before any container was created: "
        + "; ".join(f.message for f in blocking),
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

"""Ask a node's image which flags its `vllm serve` accepts, once per image id.

A recipe flag the container's vLLM does not know fails minutes into a launch, after the
image pull and the imports. Before that, `check` runs `vllm serve --help=all` in the image
on the head (a throwaway container, no network), keeps the text on this machine under the
image's id (platformdirs' user cache: the same id is the same vLLM), and makes each unknown
flag or value outside a flag's choices a blocking finding naming the flag and the image.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from spark_tui.core.errors import SparkError
from spark_tui.core.fit import Finding
from spark_tui.core.serve_flags import FlagTable, describe, parse_help

HELP_TIMEOUT = 300.0
_ID = re.compile(r"^sha256:[0-9a-f]{64}$")


def cache_dir() -> Path:
    """Where the help texts are kept on the control machine."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("spark-tui")) / "vllm-serve-help"


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
        out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
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


async def image_flag_table(docker: Any, image: str) -> tuple[FlagTable, str]:
    """The flag table of `image` on the node behind `docker` (a RemoteDocker), and the
    image id it is cached under. Raises SparkError when the image is missing or fails."""
    info = await docker.image(image)
    if info is None or not info.id:
        raise SparkError(
            f"{image} is not on {docker.node} yet, so its flags were not checked",
            "pull it (the launch does) and run check again",
        )
    text = cached_help(info.id)
    if text is None:
        text = await docker.call(lambda c: _run_help(c, image), "vllm serve --help=all")
        parse_help(text)  # refuse to cache what is not help text
        store_help(info.id, text)
    return parse_help(text), info.id


def flag_findings(table: FlagTable, argv: list[str], image: str) -> list[Finding]:
    """A blocking finding per flag the image's vLLM would refuse."""
    out = []
    for problem in table.check(argv):
        message, remedy = describe(problem, image)
        code = "unknown_flag" if problem.kind == "unknown" else "flag_value"
        out.append(Finding("error", code, message, remedy))
    return out


async def check_image_flags(pool: Any, head: str, image: str, argv: list[str]) -> list[Finding]:
    """The findings of the flag check on the head's image (an info finding when it could not
    be made: the fit verdict stands on its own then)."""
    import docker as docker_sdk

    from spark_tui.remote.docker_remote import RemoteDocker

    try:
        conn = pool[head]
        docker = await RemoteDocker.open(conn, timeout=HELP_TIMEOUT + 30)
        try:
            table, _image_id = await image_flag_table(docker, image)
        finally:
            await docker.close()
    except SparkError as exc:
        return [Finding("info", "flags_not_checked", exc.message, exc.remedy)]
    except docker_sdk.errors.DockerException as exc:
        return [
            Finding(
                "info",
                "flags_not_checked",
                f"{image} on {head} could not be asked for its flags: {exc}",
                "run `docker run --rm --entrypoint vllm IMAGE serve --help=all` on the head",
            )
        ]
    return flag_findings(table, argv, image)


def check_image_flags_sync(
    inventory: Any, head: str, image: str, argv: list[str], **pool_options: Any
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
                return [Finding("info", "flags_not_checked", exc.message, exc.remedy)]
            return await check_image_flags(pool, nodes[0].name, image, argv)
        finally:
            await pool.close()

    return asyncio.run(go())

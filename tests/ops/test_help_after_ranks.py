"""An image's flag check (`vllm serve --help=all` in a container on the head) does not start
its container while a launch makes and starts its ranks: on a small head its imports took
both cores from the ranks' start, which is the launch's own time. Its container is made,
then started once the ranks have started. A Docker double records the calls."""

from __future__ import annotations

import asyncio
from typing import Any

from spark_tui.ops.image_flags import FlagTables, run_help

HELP = "usage: vllm serve [-h]\n  --max-model-len MAX_MODEL_LEN\n"


class RecordingApi:
    """The Docker SDK's low-level calls a help run makes, recorded by name."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def inspect_container(self, name: str) -> dict[str, Any]:
        import docker.errors

        raise docker.errors.NotFound(name)  # no leftover of an earlier run

    def create_host_config(self, **kw: Any) -> dict[str, Any]:
        return dict(kw)

    def create_container(self, *a: Any, **kw: Any) -> dict[str, str]:
        self.calls.append("create")
        return {"Id": "c0ffee"}

    def start(self, name: str) -> None:
        self.calls.append("start")

    def logs(self, name: str, *, stdout: bool, stderr: bool) -> bytes:
        return HELP.encode() if stdout else b""

    def remove_container(self, name: str, force: bool) -> None:
        self.calls.append("remove")


class RecordingDocker:
    """RemoteDocker's surface that run_help uses, answering at once."""

    node = "spark-1"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.api = RecordingApi(self.calls)

    async def call(self, fn: Any, what: str) -> Any:
        return fn(self)

    async def inspect(self, name: str) -> dict[str, Any]:
        return {"State": {"Running": False, "Status": "exited", "ExitCode": 0}}


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def test_the_help_container_starts_after_the_ranks() -> None:
    tables = FlagTables()
    docker = RecordingDocker()
    async with tables.ranks_first():
        run = asyncio.ensure_future(
            run_help(docker, "img", "spark-tui-x-flags", {}, turn=tables.ranks_started)
        )
        await settle()
        assert docker.calls == ["create"], "made while the ranks start, not started"
    assert await asyncio.wait_for(run, 10) == HELP
    assert docker.calls == ["create", "start", "remove"]


async def test_the_help_container_starts_at_once_without_a_launch() -> None:
    tables = FlagTables()
    docker = RecordingDocker()
    text = await asyncio.wait_for(
        run_help(docker, "img", "spark-tui-x-flags", {}, turn=tables.ranks_started), 10
    )
    assert text == HELP and docker.calls == ["create", "start", "remove"]


async def test_a_help_run_given_up_while_waiting_removes_its_container() -> None:
    tables = FlagTables()
    docker = RecordingDocker()
    async with tables.ranks_first():
        run = asyncio.ensure_future(
            run_help(docker, "img", "spark-tui-x-flags", {}, turn=tables.ranks_started)
        )
        await settle()
        run.cancel()
        await asyncio.wait({run})
    assert run.cancelled()
    assert docker.calls == ["create", "remove"]

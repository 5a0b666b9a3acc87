"""Container logs of the simulated Docker API: streams, timestamps, since, tail, resume."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import docker
import pytest

from spark_tui.sim.nodes import Scenario, SimCluster, SimNode, random_loopback_base
from spark_tui.sim.nodes.container_logs import LogBuffer, frame, parse_unix_ns, rfc3339_nano
from spark_tui.sim.nodes.images import bundled_image_refs

IMAGE = bundled_image_refs()[-1]
COUNT_SCRIPT = "for i in $(seq 1 40); do echo line$i; sleep 0.01; done; echo done >&2"


@pytest.fixture
async def node() -> AsyncIterator[SimNode]:
    scenario = Scenario(nodes=1, ssh_port=0, base_address=random_loopback_base(1))
    async with SimCluster(scenario) as cluster:
        yield cluster.nodes[0]


def _client(node: SimNode) -> docker.DockerClient:
    return docker.DockerClient(base_url=f"unix://{node.docker_socket}")


def _ts_ns(stamp: str) -> int:
    """RFC 3339 with nanoseconds -> ns since the epoch, exactly."""
    base, frac = stamp.rstrip("Z").split(".")
    secs = int(datetime.fromisoformat(base + "+00:00").timestamp())
    return secs * 1_000_000_000 + int(frac)


def _split(chunk: bytes) -> tuple[int, str]:
    stamp, _, text = chunk.decode().partition(" ")
    return _ts_ns(stamp), text


async def test_resume_with_since_loses_nothing_and_repeats_nothing(node: SimNode) -> None:
    def follow() -> tuple[list[str], int]:
        client = _client(node)
        try:
            c = client.containers.run(IMAGE, ["sh", "-c", COUNT_SCRIPT], detach=True)
            seen: list[str] = []
            last = 0
            # First follower: reads ten lines and goes away, as a dropped SSH link does.
            stream = c.logs(stream=True, follow=True, timestamps=True, stdout=True, stderr=False)
            for chunk in stream:
                last, text = _split(chunk)
                seen.append(text)
                if len(seen) == 10:
                    break
            stream.close()
            # Resume: since = the last timestamp (Docker keeps lines at `since`), then skip
            # what is not after it. The SDK sends `since` as a float: microseconds at best.
            since = (last // 1000) / 1_000_000
            repeated = 0
            for chunk in c.logs(stream=True, follow=True, timestamps=True, since=since):
                ts, text = _split(chunk)
                if ts <= last:
                    repeated += 1
                    continue
                last = ts
                seen.append(text)
            c.remove()
            return seen, repeated
        finally:
            client.close()

    seen, repeated = await asyncio.to_thread(follow)
    assert seen == [f"line{i}\n" for i in range(1, 41)] + ["done\n"]
    assert repeated <= 1  # the server sent only lines at or after `since`


async def test_timestamps_are_rfc3339_nano_unique_and_increasing(node: SimNode) -> None:
    def logs() -> tuple[bytes, Any]:
        client = _client(node)
        try:
            c = client.containers.run(IMAGE, ["sh", "-c", COUNT_SCRIPT], detach=True)
            c.wait(timeout=10)
            return c.logs(timestamps=True), c
        finally:
            client.close()

    raw, _ = await asyncio.to_thread(logs)
    lines = raw.decode().splitlines()
    assert len(lines) == 41
    stamps = [line.split(" ", 1)[0] for line in lines]
    assert all(len(s) == 30 and s.endswith("Z") and s[19] == "." for s in stamps)
    values = [_ts_ns(s) for s in stamps]
    assert all(b - a >= 1000 for a, b in zip(values, values[1:], strict=False))


async def test_tail_streams_and_until(node: SimNode) -> None:
    def logs() -> dict[str, Any]:
        client = _client(node)
        try:
            c = client.containers.run(IMAGE, ["sh", "-c", COUNT_SCRIPT], detach=True)
            c.wait(timeout=10)
            stamped = c.logs(timestamps=True).decode().splitlines()
            tenth = _ts_ns(stamped[9].split(" ", 1)[0])
            until = (tenth // 1000 + 1) / 1_000_000
            return {
                "tail": c.logs(tail=3),
                "stderr": c.logs(stdout=False, stderr=True),
                "stdout": c.logs(stdout=True, stderr=False).count(b"\n"),
                "until": c.logs(until=until).decode().splitlines(),
            }
        finally:
            client.close()

    got = await asyncio.to_thread(logs)
    assert got["tail"] == b"line39\nline40\ndone\n"
    assert got["stderr"] == b"done\n"
    assert got["stdout"] == 40
    assert got["until"] == [f"line{i}" for i in range(1, 11)]


async def test_raw_stream_is_multiplexed_and_since_takes_nanoseconds(node: SimNode) -> None:
    def raw() -> tuple[bytes, bytes]:
        client = _client(node)
        try:
            c = client.containers.run(IMAGE, ["sh", "-c", "echo out; echo err >&2"], detach=True)
            c.wait(timeout=10)
            api = client.api
            url = api.base_url + f"/v1.41/containers/{c.id}/logs"
            full = api.get(url, params={"stdout": 1, "stderr": 1, "timestamps": 1}).content
            stamps = [line.split(b" ")[0] for line in full.split(b"\n") if b"Z " in line]
            second = _ts_ns(stamps[-1].decode()[-30:])
            since = f"{second // 10**9}.{second % 10**9:09d}"
            later = api.get(url, params={"stdout": 1, "stderr": 1, "since": since}).content
            return full, later
        finally:
            client.close()

    full, later = await asyncio.to_thread(raw)
    kinds = []
    rest = full
    while rest:
        kind, size = struct.unpack(">BxxxL", rest[:8])
        kinds.append((kind, rest[8 : 8 + size].split(b" ", 1)[1]))
        rest = rest[8 + size :]
    assert sorted(kinds) == [(1, b"out\n"), (2, b"err\n")]
    assert later in (frame(2, b"err\n"), frame(1, b"out\n"))  # only the last line, once


async def test_the_log_is_kept_in_docker_json_file_format(node: SimNode) -> None:
    def run() -> str:
        client = _client(node)
        try:
            c = client.containers.run(IMAGE, ["sh", "-c", "echo hello"], detach=True)
            c.wait(timeout=10)
            c.reload()
            return str(c.attrs["LogPath"])
        finally:
            client.close()

    path = await asyncio.to_thread(run)
    records = [json.loads(line) for line in open(path, encoding="utf-8")]
    assert records[0]["log"] == "hello\n" and records[0]["stream"] == "stdout"
    assert _ts_ns(records[0]["time"]) > 0


def test_since_parsing_is_exact_to_the_nanosecond() -> None:
    assert parse_unix_ns("1700000000.123456789") == 1_700_000_000_123_456_789
    assert parse_unix_ns("1700000000.5") == 1_700_000_000_500_000_000
    assert parse_unix_ns("1700000000") == 1_700_000_000_000_000_000
    with pytest.raises(ValueError):
        parse_unix_ns("yesterday")
    assert rfc3339_nano(1_700_000_000_000_000_001) == "2023-11-14T22:13:20.000000001Z"


async def test_a_follower_waits_for_new_lines_and_ends_at_close() -> None:
    log = LogBuffer()
    assert log.closed  # a created container's log: followers do not wait
    log.reopen()
    log.append(1, b"a\n")
    waiter = asyncio.create_task(log.wait_beyond(1))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    log.append(2, b"b\n")
    await asyncio.wait_for(waiter, 1)
    closing = asyncio.create_task(log.wait_beyond(2))
    log.close()
    await asyncio.wait_for(closing, 1)
    assert [e.data for e in log.entries] == [b"a\n", b"b\n"]
    assert log.entries[1].ts_ns - log.entries[0].ts_ns >= 1000

"""HTTP over direct TCP/IP channels of a node's open SSH connection (remote.ssh_http), and the
benchmark of our cluster's API using them instead of the forward's local port."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest
from mini_sshd import MiniServer

from spark_tui.ops.bench import BenchConfig
from spark_tui.remote.ssh import NodeConnection
from spark_tui.remote.ssh_http import ChannelTransport
from spark_tui.service.api import ApiTarget
from spark_tui.service.ssh_nodes import SshNodes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))
from engine_harness import Engine, free_port  # noqa: E402

FAST = {"ssh_config": None, "connect_timeout": 3.0, "backoff_initial": 0.05}


def known(tmp_path: Path, server: MiniServer) -> Path:
    path = tmp_path / "known_hosts"
    path.write_text(server.known_hosts_line())
    return path


async def _streaming_server() -> tuple[asyncio.Server, list[int]]:
    """An HTTP/1.1 server that streams three chunked SSE lines per request and keeps the
    connection open; the list counts the TCP connections it accepted."""
    accepted: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode().split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for i in range(3):
                    data = f"data: {i}\n\n".encode()
                    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0), accepted


async def test_requests_stream_over_one_kept_channel(
    tmp_path: Path, servers: list[MiniServer]
) -> None:
    server, accepted = await _streaming_server()
    port = server.sockets[0].getsockname()[1]
    conn = NodeConnection(servers[0].node("a", known(tmp_path, servers[0])), **FAST)
    await conn.connect()
    transport = ChannelTransport(lambda: conn.open_tcp("127.0.0.1", port), max_connections=2)
    try:
        # The URL names the API for the user; the channel's end is the one given.
        async with httpx.AsyncClient(transport=transport, base_url="http://api.invalid") as c:
            for _ in range(3):
                async with c.stream("POST", "/v1/x", json={"a": 1}) as resp:
                    lines = [line async for line in resp.aiter_lines() if line]
                assert resp.status_code == 200
                assert lines == ["data: 0", "data: 1", "data: 2"]
        # Kept alive: three requests, one channel, one connection on the server.
        assert servers[0].forwarded == [("127.0.0.1", port)]
        assert accepted == [1]
    finally:
        await conn.close()
        server.close()
        await server.wait_closed()


async def test_a_destination_nobody_serves_is_httpx_connect_error(
    tmp_path: Path, servers: list[MiniServer]
) -> None:
    conn = NodeConnection(servers[0].node("a", known(tmp_path, servers[0])), **FAST)
    await conn.connect()
    port = free_port()
    transport = ChannelTransport(lambda: conn.open_tcp("127.0.0.1", port))
    try:
        async with httpx.AsyncClient(transport=transport) as client:
            with pytest.raises(httpx.ConnectError):
                await client.get("http://api.invalid/health")
    finally:
        await conn.close()


async def _no(host: str, fingerprint: str) -> bool:
    return False


async def test_a_clusters_benchmark_opens_channels_on_the_head_not_the_forward(
    tmp_path: Path, servers: list[MiniServer]
) -> None:
    """The benchmark of our cluster's API goes over the head's own connection: nothing
    listens at the forward's address here, and the benchmark still runs."""
    port = free_port()
    engine = Engine(["serve", "Qwen/Qwen3-0.6B", "--host", "127.0.0.1", "--port", str(port)])
    nodes = SshNodes([servers[0].node("head", known(tmp_path, servers[0]))])
    try:
        engine.wait_healthy(port, timeout=60)
        await nodes.open(strict=True, confirm=_no)
        target = ApiTarget(
            f"http://127.0.0.1:{free_port()}",  # no forward there
            via_cluster=True,
            head_api=("head", "127.0.0.1", port),
        )
        cfg = BenchConfig(concurrency=(2,), requests_per_level=4)
        result = await nodes.bench_run(target, cfg, lambda _: None).run()
    finally:
        await nodes.close()
        engine.stop()
    (level,) = result.levels
    assert level.requests == 4 and level.errors == 0
    # Every channel went to the engine, at most one a request in flight (and the sampler's).
    assert servers[0].forwarded and set(servers[0].forwarded) == {("127.0.0.1", port)}
    assert len(servers[0].forwarded) <= cfg.max_connections

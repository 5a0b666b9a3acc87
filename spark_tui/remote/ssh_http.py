"""An HTTP transport whose connections are direct TCP/IP channels of a node's open SSH
connection: the node's API reached with no local listener in between.

A local port forward relays every byte twice on this machine (the HTTP client's socket to
the forward's listener, then asyncssh's copy onto the channel, and the same back), each a
socket write and a wake-up of the event loop. A benchmark times the first token through that
relay; this transport hands the channel's bytes to the HTTP client directly, as a client on
the node itself would get them from its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import asyncssh
import httpcore
import httpx

# Opens a direct TCP/IP channel to the destination: its reader and writer.
OpenChannel = Callable[[], Awaitable[tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]]]

_CHANNEL_ERRORS = (asyncssh.Error, OSError, EOFError)


class _ChannelStream(httpcore.AsyncNetworkStream):
    """One direct TCP/IP channel as httpcore's network stream."""

    def __init__(
        self, reader: asyncssh.SSHReader[bytes], writer: asyncssh.SSHWriter[bytes]
    ) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc)) from exc
        except _CHANNEL_ERRORS as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(buffer)
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc)) from exc
        except _CHANNEL_ERRORS as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(*_CHANNEL_ERRORS):
            await self._writer.wait_closed()

    def get_extra_info(self, info: str) -> Any:
        return None


class _ChannelBackend(httpcore.AsyncNetworkBackend):
    """Every connection httpcore opens is a new channel to the one destination (the URL's
    host and port name the API for the user; the channel's end is fixed)."""

    def __init__(self, open_channel: OpenChannel) -> None:
        self._open = open_channel

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await self._open()
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except _CHANNEL_ERRORS as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return _ChannelStream(reader, writer)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("a channel transport connects to one TCP destination")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _httpx_error(exc: httpcore.TimeoutException | httpcore.NetworkError | Exception) -> Exception:
    """httpcore's exception as httpx's of the same name (what httpx's own transport raises)."""
    kind = getattr(httpx, type(exc).__name__, None)
    if isinstance(kind, type) and issubclass(kind, httpx.TransportError):
        return kind(str(exc))
    return httpx.TransportError(str(exc))


_HTTPCORE_ERRORS = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError)


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except _HTTPCORE_ERRORS as exc:
            raise _httpx_error(exc) from exc

    async def aclose(self) -> None:
        if hasattr(self._stream, "aclose"):
            await self._stream.aclose()


class ChannelTransport(httpx.AsyncBaseTransport):
    """httpx's transport over direct TCP/IP channels (`open_channel` opens one), pooled and
    kept alive like httpx's own: up to `max_connections` channels."""

    def __init__(self, open_channel: OpenChannel, max_connections: int = 10) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=60.0,
            network_backend=_ChannelBackend(open_channel),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        req = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            resp = await self._pool.handle_async_request(req)
        except _HTTPCORE_ERRORS as exc:
            raise _httpx_error(exc) from exc
        return httpx.Response(
            status_code=resp.status,
            headers=resp.headers,
            stream=_Body(resp.stream),
            extensions=resp.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()

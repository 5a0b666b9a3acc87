"""The web demo's door: nothing is served and nothing started without the token, on a Host
that is not this machine's, or for a websocket opened by another site's page."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from types import ModuleType

import aiohttp
import httpx
import pytest

from spark_tui.core.errors import InputError
from spark_tui.ui.web.access import Access, checked_token, is_loopback
from tests.procs import descendants, running


def test_the_token_is_the_first_path_segment() -> None:
    access = Access(token="a" * 24, port=8000, loopback_only=True)
    assert access.path_ok("/" + "a" * 24 + "/")
    assert access.path_ok("/" + "a" * 24 + "/static/js/textual.js")
    assert not access.path_ok("/")
    assert not access.path_ok("/" + "a" * 23 + "/")
    assert not access.path_ok("/x/" + "a" * 24 + "/")


def test_loopback_serves_only_loopback_host_names_on_its_port() -> None:
    access = Access(token="a" * 24, port=8000, loopback_only=True)
    for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000"):
        assert access.host_ok(host), host
    # DNS rebinding: another site's name resolving to 127.0.0.1
    for host in ("evil.example:8000", "127.0.0.1:9000", "127.0.0.1", ""):
        assert not access.host_ok(host), host
    exposed = Access(token="a" * 24, port=8000, loopback_only=False)
    assert exposed.host_ok("spark-demo.lan:8000")


def test_a_websocket_must_come_from_the_page_of_the_same_host() -> None:
    access = Access(token="a" * 24, port=8000, loopback_only=True)
    assert access.origin_ok("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert not access.origin_ok("http://evil.example", "127.0.0.1:8000")
    assert not access.origin_ok("null", "127.0.0.1:8000")
    assert not access.origin_ok(None, "127.0.0.1:8000")


def test_tokens() -> None:
    first, second = checked_token(None), checked_token(None)
    assert first != second and len(first) >= 32
    assert checked_token("my-demo-token-2026") == "my-demo-token-2026"
    for bad in ("short", "has space in it ....", "slash/in/the/token/x", "x" * 129):
        with pytest.raises(InputError) as err:
            checked_token(bad)
        assert "remedy" in str(err.value)
    assert is_loopback("127.0.0.5") and is_loopback("::1") and not is_loopback("0.0.0.0")


def test_without_the_token_403_and_nothing_started(
    browser_demo: ModuleType, server_home: Path
) -> None:
    server = browser_demo.start_server("--token", "the-right-token-1234", home=server_home)
    try:
        base = server.url.rsplit("/", 2)[0]
        assert server.url == base + "/the-right-token-1234/"
        refused = [
            base + "/",
            base + "/the-wrong-token-1234/",
            base + "/the-wrong-token-1234/ws",
            base + "/the-wrong-token-1234/static/js/textual.js",
            base + "/static/js/textual.js",
            base + "/ws",
        ]
        ws_headers = {
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            "Origin": server.origin,
        }
        with httpx.Client(timeout=10) as client:
            for url in refused:
                for headers in ({}, ws_headers):
                    reply = client.get(url, headers=headers)
                    assert reply.status_code == 403, (url, reply.status_code)
                    assert "token" in reply.text
            # The right token from another site's page, or under another Host name
            bad_origin = dict(ws_headers, Origin="http://evil.example")
            assert client.get(server.url + "ws", headers=bad_origin).status_code == 403
            no_origin = {k: v for k, v in ws_headers.items() if k != "Origin"}
            assert client.get(server.url + "ws", headers=no_origin).status_code == 403
            rebound = {"Host": "evil.example:" + server.url.split(":")[2].split("/")[0]}
            assert client.get(server.url, headers=rebound).status_code == 403
            # ... while the page itself is served with the token
            page = client.get(server.url)
            assert page.status_code == 200 and "textual.js" in page.text
            assert page.headers["Referrer-Policy"] == "no-referrer"
            assert "fonts.googleapis" not in page.text  # no third party learns of the visit
        assert descendants(server.proc.pid) == set()  # no visitor was started
    finally:
        assert browser_demo.stop(server) == 0
    assert server.proc.returncode == 0


ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_ctrl_c_with_a_visitor_leaves_no_process(
    browser_demo: ModuleType, server_home: Path
) -> None:
    """A visitor's cockpit has launched its simulated cluster; Ctrl+C (SIGINT to the server
    alone) ends the server, the cockpit, its simulated Sparks and their engines."""
    server = browser_demo.start_server(home=server_home)
    pid = server.proc.pid

    async def visit() -> set[int]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                server.url.replace("http", "ws", 1) + "ws?width=120&height=40",
                headers={"Origin": server.origin},
            ) as socket,
        ):
            stream = b""

            async def until(text: bytes, timeout: float) -> None:
                nonlocal stream
                async with asyncio.timeout(timeout):
                    async for message in socket:
                        if message.type == aiohttp.WSMsgType.BINARY:
                            stream = ESCAPES.sub(b"", stream + message.data)[-20000:]
                        if text in stream:
                            return
                raise AssertionError(f"the websocket closed before {text!r}")

            await until(b"2 of 2 nodes reachable", 60)
            await socket.send_json(["stdin", "l"])
            await until(b"ready (t smoke", 90)
            visitor_procs = descendants(pid)
            assert len(visitor_procs) >= 3, "the visitor's cockpit and an engine per rank"
            assert browser_demo.stop(server) == 0
            return set(visitor_procs)

    try:
        visitor_procs = asyncio.run(visit())
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    # raises when one is still there after 10 s
    browser_demo.wait_until(
        lambda: not any(running(p) for p in visitor_procs), 10, "every process to end"
    )

"""The web demo's server: textual-serve's page and per-visitor app process, behind the
token, Host and Origin checks of `access`, with a cap on visitors at once; Ctrl+C ends
every visitor's cockpit (and so its simulated Sparks) before the server goes."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
import textual_serve
from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from spark_tui.core.errors import InputError
from spark_tui.ui.web.access import Access, is_loopback, url_host
from spark_tui.ui.web.options import DemoOptions

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(textual_serve.__file__).parent / "static"
# A visitor's cockpit stops its cluster and its simulated Sparks before it exits.
STOP_TIMEOUT = 30.0
# A tab that vanished without closing its websocket (laptop lid, lost link) is noticed.
HEARTBEAT = 15.0
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",  # the token is in the URL: never pass it on
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}
FORBIDDEN = (
    "403 Forbidden: this address needs the link that `spark-tui demo --web` printed "
    "(with its token).\n"
)


def _size(raw: str | None, default: int) -> int:
    try:
        return max(10, min(int(raw or default), 1000))
    except ValueError:
        return default


class WebDemo:
    """The aiohttp application: one demo cockpit process per websocket, at most
    `max_visitors` at once."""

    def __init__(self, access: Access, options: DemoOptions, max_visitors: int) -> None:
        self.access = access
        self.options = options
        self.max_visitors = max_visitors
        self.visitors: set[AppService] = set()
        self.closing = False
        self.downloads = DownloadManager()

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self.guard])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
        prefix = self.access.prefix
        app.router.add_get(prefix.rstrip("/"), self.to_index)
        app.router.add_get(prefix, self.index)
        app.router.add_get(prefix + "ws", self.websocket)
        app.router.add_static(prefix + "static", STATIC)
        return app

    @web.middleware
    async def guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Nothing is served, and nothing started, without the token on an allowed Host."""
        if not (self.access.host_ok(request.host) and self.access.path_ok(request.path)):
            return web.Response(status=403, text=FORBIDDEN, headers=SECURITY_HEADERS)
        response = await handler(request)
        if not response.prepared:
            response.headers.update(SECURITY_HEADERS)
        return response

    async def to_index(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(self.access.prefix)

    def full(self, request: web.Request) -> web.StreamResponse:
        """The page a visitor over the cap (or during shutdown) sees instead of a cockpit."""
        return aiohttp_jinja2.render_template(
            "full.html",
            request,
            {"max_visitors": self.max_visitors, "closing": self.closing},
            status=503,
        )

    async def index(self, request: web.Request) -> web.StreamResponse:
        if self.closing or len(self.visitors) >= self.max_visitors:
            return self.full(request)
        scheme = "wss" if request.secure else "ws"
        context: dict[str, Any] = {
            "title": f"spark-tui demo · {self.options.nodes} simulated Sparks",
            "font_size": _size(request.query.get("fontsize"), 16),
            "websocket_url": f"{scheme}://{request.host}{self.access.prefix}ws",
            "static_url": f"{self.access.prefix}static/",
        }
        return aiohttp_jinja2.render_template("index.html", request, context)

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        if not self.access.origin_ok(request.headers.get("Origin"), request.host):
            return web.Response(status=403, text=FORBIDDEN)
        if self.closing or len(self.visitors) >= self.max_visitors:
            return self.full(request)
        socket_ = web.WebSocketResponse(heartbeat=HEARTBEAT)

        async def close() -> None:  # the visitor's app ended (it quit): the page says so
            await socket_.close()

        visitor = AppService(
            self.options.command(),
            write_bytes=socket_.send_bytes,
            write_str=socket_.send_str,
            close=close,
            download_manager=self.downloads,
        )
        # Counted before the first await: two websockets at once cannot both take the last seat.
        self.visitors.add(visitor)
        try:
            await socket_.prepare(request)
            width = _size(request.query.get("width"), 80)
            height = _size(request.query.get("height"), 24)
            await visitor.start(width, height)
            await relay(socket_, visitor)
        finally:
            # The tab closed (or the server stops): the visitor's cockpit quits, which stops
            # its cluster and its simulated Sparks.
            await visitor.stop()
            self.visitors.discard(visitor)
        return socket_

    async def stop_visitors(self) -> None:
        self.closing = True
        running = list(self.visitors)
        if not running:
            return
        try:
            await asyncio.wait_for(
                asyncio.gather(*(v.stop() for v in running), return_exceptions=True),
                STOP_TIMEOUT,
            )
        except TimeoutError:
            print(
                f"spark-tui: {len(self.visitors)} visitor demo(s) did not stop in "
                f"{STOP_TIMEOUT:.0f} s\n  remedy: look for leftover `spark_tui.ui.web.visitor` "
                "processes (ps -ef) and end them",
                file=sys.stderr,
            )


async def relay(socket_: web.WebSocketResponse, visitor: AppService) -> None:
    """The browser's keys, sizes and focus to the visitor's app (textual-serve's protocol)."""
    async for message in socket_:
        if message.type != WSMsgType.TEXT:
            continue
        try:
            envelope = message.json()
            kind, data = envelope[0], (envelope[1] if len(envelope) > 1 else None)
        except (ValueError, TypeError, IndexError, KeyError):
            continue  # not the page's protocol: ignored, as textual-serve would not parse it
        if kind == "stdin" and isinstance(data, str):
            await visitor.send_bytes(data.encode("utf-8"))
        elif kind == "resize" and isinstance(data, dict):
            await visitor.set_terminal_size(
                _size(data.get("width"), 80), _size(data.get("height"), 24)
            )
        elif kind == "ping":
            await socket_.send_json(["pong", data])
        elif kind == "blur":
            await visitor.blur()
        elif kind == "focus":
            await visitor.focus()


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening socket (port 0: any free one), or an input error with a remedy."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(64)
    except OSError as exc:
        raise InputError(
            f"cannot listen on {host} port {port}: {exc.strerror or exc}",
            "pick another --port (0 takes any free one) or another --host",
        ) from None
    return sock


def public_url(host: str, port: int, token: str) -> str:
    """The link to print: a wildcard address is reached by this machine's name."""
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    return f"http://{url_host(shown)}:{port}/{token}/"


def serve(*, host: str, port: int, token: str, options: DemoOptions, max_visitors: int) -> int:
    """Serve until Ctrl+C (or SIGTERM/SIGHUP), then end every visitor's demo."""
    sock = listening_socket(host, port)
    port = sock.getsockname()[1]
    access = Access(token=token, port=port, loopback_only=is_loopback(host))
    demo = WebDemo(access, options, max_visitors)
    url = public_url(host, port, token)
    reach = "this machine only" if access.loopback_only else "anyone who can reach this address"
    print(
        f"spark-tui demo --web: the demo cockpit on simulated Sparks, for up to {max_visitors} "
        f"browser tab(s) at once ({reach}, with the link)\n"
        f"  open {url}\n"
        "  Ctrl+C stops the server and every visitor's demo",
        flush=True,
    )
    asyncio.run(_serve(demo, sock))
    return 0


async def _serve(demo: WebDemo, sock: socket.socket) -> None:
    runner = web.AppRunner(demo.application(), access_log=None)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    try:
        await web.SockSite(runner, sock).start()
        await stop.wait()
        print("spark-tui: stopping every visitor's demo ...", file=sys.stderr, flush=True)
        await demo.stop_visitors()
    finally:
        await runner.cleanup()

"""How simulated ranks meet: the head (node rank 0) listens on --master-addr:--master-port and
waits for every other rank; the others connect with retries until a timeout. Each connection
stays open as a heartbeat (a ping every 0.5 s; end-of-file or silence means the peer is gone),
and carries the few startup messages the ranks exchange (newline-delimited JSON):

hello {rank, fingerprint} -> welcome | reject {error};  head -> all: start, kv {kv_bytes},
ready, abort {reason}, shutdown;  rank -> head: loaded {kv_bytes}, failed {error}.
"""

from __future__ import annotations

import errno
import json
import queue
import select
import socket
import threading
import time
from typing import Any, Callable

PING_INTERVAL_S = 0.5

Message = dict[str, Any]


class PortInUse(Exception):
    """The rendezvous port is taken on this node."""


class JoinTimeout(Exception):
    """Not every rank joined (head) / the head was not reachable (rank) in time."""

    def __init__(self, joined: int = 0) -> None:
        super().__init__(joined)
        self.joined = joined


class Rejected(Exception):
    """The head refused this rank (a mismatched model or layout)."""


class Link:
    """One open connection between two ranks, with a reader thread and heartbeats."""

    def __init__(
        self,
        sock: socket.socket,
        peer_rank: int,
        peer_name: str,
        on_message: Callable[[Link, Message], None],
        on_lost: Callable[[Link], None],
        silence_timeout: float,
    ) -> None:
        self.sock = sock
        self.peer_rank = peer_rank
        self.peer_name = peer_name
        self._on_message = on_message
        self._on_lost = on_lost
        self._silence = silence_timeout
        self._send_lock = threading.Lock()
        self._closed = threading.Event()
        self.last_seen = time.monotonic()
        self.quiet = False  # set when the peer said goodbye (shutdown), so EOF is not a loss

    def start(self, buffered: bytes = b"") -> None:
        """Start the reader and heartbeat threads."""
        threading.Thread(target=self._read, args=(buffered,), daemon=True).start()
        threading.Thread(target=self._beat, daemon=True).start()

    def send(self, msg: Message) -> bool:
        """Send one message; False if the connection is gone."""
        data = (json.dumps(msg) + "\n").encode()
        with self._send_lock:
            try:
                self.sock.sendall(data)
                return True
            except OSError:
                return False

    def close(self) -> None:
        """Close without reporting a loss."""
        self.quiet = True
        self._closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def gone(self) -> bool:
        """Whether the peer has closed its end (a dead process's socket is closed by the
        kernel at once), seen without waiting for the reader thread to notice."""
        if self._closed.is_set():
            return not self.quiet
        try:
            # The socket has a timeout (the reader's), so recv would wait: ask first
            # whether anything (data, or the end) is there to read.
            readable, _, _ = select.select([self.sock], [], [], 0)
            if not readable:
                return False
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except (BlockingIOError, InterruptedError, TimeoutError):
            return False
        except (OSError, ValueError):
            return True

    def _lost(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self.sock.close()
        except OSError:
            pass
        if not self.quiet:
            self._on_lost(self)

    def _read(self, buffered: bytes) -> None:
        buf = buffered
        self.sock.settimeout(PING_INTERVAL_S)
        while not self._closed.is_set():
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.last_seen = time.monotonic()
                try:
                    msg = json.loads(line.decode())
                except ValueError:
                    continue
                if msg.get("type") != "ping":
                    self._on_message(self, msg)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                if time.monotonic() - self.last_seen > self._silence:
                    self._lost()
                    return
                continue
            except OSError:
                self._lost()
                return
            if not chunk:
                self._lost()
                return
            buf += chunk

    def _beat(self) -> None:
        while not self._closed.wait(PING_INTERVAL_S):
            if not self.send({"type": "ping"}):
                self._lost()
                return


def _fingerprint_mismatch(mine: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    diffs = [
        f"{key}={theirs.get(key)!r} (head: {mine.get(key)!r})"
        for key in sorted(mine)
        if theirs.get(key) != mine.get(key)
    ]
    return ", ".join(diffs) if diffs else None


class Head:
    """The rendezvous server on node rank 0."""

    def __init__(
        self,
        bind_host: str,
        port: int,
        expected_ranks: list[int],
        fingerprint: dict[str, Any],
        silence_timeout: float,
        on_lost: Callable[[Link], None],
    ) -> None:
        self.bind_host = bind_host
        self.port = port
        self.expected = set(expected_ranks)
        self.fingerprint = fingerprint
        self.silence_timeout = silence_timeout
        self.on_lost = on_lost
        self.links: dict[int, Link] = {}
        self.inbox: queue.Queue[Message] = queue.Queue()
        self._lock = threading.Lock()
        self._joined = threading.Condition(self._lock)
        self._sock: socket.socket | None = None
        self._closing = False

    def listen(self) -> None:
        """Bind and listen; raises PortInUse."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.bind_host, self.port))
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse() from exc
            raise
        sock.listen(64)
        self._sock = sock
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._closing:
            try:
                conn, addr = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._greet, args=(conn, addr), daemon=True).start()

    def _greet(self, conn: socket.socket, addr: Any) -> None:
        conn.settimeout(10.0)
        buf = b""
        try:
            while b"\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    conn.close()
                    return
                buf += chunk
        except OSError:
            conn.close()
            return
        line, rest = buf.split(b"\n", 1)
        try:
            hello = json.loads(line.decode())
        except ValueError:
            conn.close()
            return
        rank = int(hello.get("rank", -1))
        error = _fingerprint_mismatch(self.fingerprint, hello.get("fingerprint") or {})
        with self._lock:
            if error is None and rank not in self.expected:
                error = f"rank {rank} is not expected (expected ranks {sorted(self.expected)})"
            if error is None and rank in self.links:
                error = f"rank {rank} has already joined"
            if error is not None:
                _send_raw(conn, {"type": "reject", "error": error})
                conn.close()
                return
            name = f"{hello.get('hostname', addr[0])}<{addr[1]}>"
            link = Link(conn, rank, name, self._message, self.on_lost, self.silence_timeout)
            self.links[rank] = link
            link.send({"type": "welcome"})
            link.start(rest)
            self._joined.notify_all()

    def _message(self, link: Link, msg: Message) -> None:
        msg = dict(msg)
        msg["_rank"] = link.peer_rank
        if msg.get("type") == "shutdown":
            link.quiet = True
        self.inbox.put(msg)

    def wait_all(self, timeout: float, cancelled: Callable[[], bool]) -> None:
        """Block until every expected rank joined; raises JoinTimeout."""
        end = time.monotonic() + timeout
        with self._lock:
            while set(self.links) != self.expected:
                left = end - time.monotonic()
                if left <= 0:
                    raise JoinTimeout(len(self.links) + 1)
                if cancelled():
                    return
                self._joined.wait(min(left, 0.1))

    def broadcast(self, msg: Message) -> None:
        """Send a message to every joined rank."""
        with self._lock:
            links = list(self.links.values())
        for link in links:
            link.send(msg)

    def close(self) -> None:
        """Stop listening and close every link quietly."""
        self._closing = True
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        with self._lock:
            links = list(self.links.values())
        for link in links:
            link.close()


def _send_raw(conn: socket.socket, msg: Message) -> None:
    try:
        conn.sendall((json.dumps(msg) + "\n").encode())
    except OSError:
        pass


def lost_peer(head: Head) -> str | None:
    """The name of the first peer whose connection to `head` is gone, else None."""
    with head._lock:
        links = list(head.links.values())
    return next((link.peer_name for link in links if link.gone()), None)


class Member:
    """A non-zero rank's connection to the head."""

    def __init__(
        self,
        host: str,
        port: int,
        rank: int,
        fingerprint: dict[str, Any],
        hostname: str,
        source_address: str | None,
        silence_timeout: float,
        on_lost: Callable[[Link], None],
    ) -> None:
        self.host = host
        self.port = port
        self.rank = rank
        self.fingerprint = fingerprint
        self.hostname = hostname
        self.source_address = source_address
        self.silence_timeout = silence_timeout
        self.on_lost = on_lost
        self.inbox: queue.Queue[Message] = queue.Queue()
        self.link: Link | None = None

    def join(
        self,
        timeout: float,
        on_retry: Callable[[int], None],
        cancelled: Callable[[], bool],
    ) -> None:
        """Connect (retrying) and say hello; raises JoinTimeout or Rejected."""
        end = time.monotonic() + timeout
        attempt = 0
        while True:
            if cancelled():
                raise JoinTimeout()
            try:
                sock = socket.create_connection(
                    (self.host, self.port),
                    timeout=max(0.2, min(2.0, end - time.monotonic())),
                    source_address=(self.source_address, 0) if self.source_address else None,
                )
                break
            except OSError:
                attempt += 1
                on_retry(attempt)
                if time.monotonic() + 0.2 >= end:
                    raise JoinTimeout() from None
                time.sleep(0.2)
        _send_raw(
            sock,
            {
                "type": "hello",
                "rank": self.rank,
                "hostname": self.hostname,
                "fingerprint": self.fingerprint,
            },
        )
        sock.settimeout(max(1.0, end - time.monotonic()))
        buf = b""
        try:
            while b"\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    raise Rejected("the head closed the connection")
                buf += chunk
        except socket.timeout:
            sock.close()
            raise JoinTimeout() from None
        line, rest = buf.split(b"\n", 1)
        reply = json.loads(line.decode())
        if reply.get("type") != "welcome":
            sock.close()
            raise Rejected(str(reply.get("error", "rejected")))
        self.link = Link(
            sock, 0, f"{self.host}<{self.port}>", self._message, self.on_lost, self.silence_timeout
        )
        self.link.start(rest)

    def _message(self, link: Link, msg: Message) -> None:
        if msg.get("type") == "shutdown":
            link.quiet = True
        self.inbox.put(msg)

    def send(self, msg: Message) -> None:
        """Send to the head (ignored when not connected)."""
        if self.link is not None:
            self.link.send(msg)

    def close(self) -> None:
        """Close quietly."""
        if self.link is not None:
            self.link.close()

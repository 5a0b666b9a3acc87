"""Who may reach the web demo: the token in every path, the Host a browser names, the Origin
of every websocket (textual-serve checks none of them itself)."""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
from dataclasses import dataclass

from spark_tui.core.errors import InputError

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,128}")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def new_token() -> str:
    """A random token for the URL (192 bits, URL-safe)."""
    return secrets.token_urlsafe(24)


def checked_token(token: str | None) -> str:
    """The user's token when it is long and plain enough for a URL path, else a new one."""
    if token is None:
        return new_token()
    if not TOKEN_PATTERN.fullmatch(token):
        raise InputError(
            "--token must be 16 to 128 characters of A-Z, a-z, 0-9, '-' or '_'",
            "leave --token out for a random one, or pass e.g. "
            "--token $(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')",
        )
    return token


def is_loopback(host: str) -> bool:
    """True for an address or name that only this machine reaches."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """`host` as it stands in a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass(frozen=True)
class Access:
    """The rules every request meets before anything is started for it."""

    token: str
    port: int
    loopback_only: bool

    @property
    def prefix(self) -> str:
        return f"/{self.token}/"

    def path_ok(self, path: str) -> bool:
        """The path's first segment is the token (compared in constant time)."""
        first = path.lstrip("/").split("/", 1)[0]
        return hmac.compare_digest(first.encode(), self.token.encode())

    def host_ok(self, host: str) -> bool:
        """On loopback, only loopback names: a page on another site that makes its name
        resolve to 127.0.0.1 (DNS rebinding) is not let in."""
        if not self.loopback_only:
            return bool(host)
        name, _, port = host.rpartition(":")
        return is_loopback(name) and port == str(self.port)

    def origin_ok(self, origin: str | None, host: str) -> bool:
        """A websocket is opened by this server's own page: another site's page cannot drive
        a visitor's cockpit from the visitor's browser."""
        return origin in (f"http://{host}", f"https://{host}")

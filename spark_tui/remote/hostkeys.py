"""Host keys: known_hosts verified, unknown keys confirmed by the user, changed keys refused.

asyncssh checks the server's key against the known_hosts files it is given. When the key
is not trusted there, `RecordingClient.validate_host_public_key` notes the presented key
and refuses it, so the connection fails with `HostKeyNotVerifiable`. `HostKeyPolicy`
then decides: a host with other keys on record has CHANGED its key (refused with the
remedy); a host with no key on record is UNKNOWN and needs a yes, from the confirm
callback (the cockpit's modal, a terminal prompt) or from `--accept-new-host-keys`. An
accepted key is appended to known_hosts and the connection is made again, verified
against the file as usual. Nothing is ever trusted silently.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from spark_tui.core.errors import UnreachableError

# (host, "SHA256:...") -> True when the user says yes.
HostKeyConfirm = Callable[[str, str], Awaitable[bool]]

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


class HostKeyError(UnreachableError):
    """A host key that is unknown and not accepted, or that changed (exit 3)."""


@dataclass
class PresentedKey:
    """The key a server presented that known_hosts did not trust."""

    host: str
    addr: str
    port: int
    key: asyncssh.SSHKey

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key)


def fingerprint(key: asyncssh.SSHKey) -> str:
    """The SHA256 fingerprint OpenSSH prints (`SHA256:...`)."""
    return str(key.get_fingerprint("sha256"))


def host_pattern(host: str, port: int) -> str:
    """How OpenSSH names a host in known_hosts: `host`, or `[host]:port` off port 22."""
    return host if port in (22, 0) else f"[{host}]:{port}"


class RecordingClient(asyncssh.SSHClient):
    """An SSH client that records an untrusted host key (and refuses it) and a lost connection."""

    def __init__(self) -> None:
        self.presented: PresentedKey | None = None
        self.lost = False
        self.lost_reason: str | None = None

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        # Called only for a key known_hosts does not trust: remember it, refuse it.
        self.presented = PresentedKey(host=host, addr=addr, port=port, key=key)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.lost_reason = str(exc) if exc else None


def known_keys(
    paths: Sequence[str], host: str, addr: str | None, port: int
) -> list[asyncssh.SSHKey]:
    """The keys the known_hosts files hold for this host (by name or address)."""
    keys: list[asyncssh.SSHKey] = []
    for path in existing(paths):
        try:
            db = asyncssh.read_known_hosts(path)
        except (OSError, ValueError):
            continue
        trusted = db.match(host, addr or "", port if port != 22 else None)[0]
        keys.extend(trusted)
    return keys


def existing(paths: Sequence[str]) -> list[str]:
    """The paths (with ~ expanded) that are readable files."""
    found = []
    for raw in paths:
        path = os.path.expanduser(raw)
        if os.path.isfile(path) and os.access(path, os.R_OK):
            found.append(path)
    return found


def append_known_host(path: str, host: str, port: int, key: asyncssh.SSHKey) -> None:
    """Append `host key` to a known_hosts file (creating it, and ~/.ssh, privately)."""
    target = Path(os.path.expanduser(path))
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    public = key.export_public_key("openssh").decode().strip()
    # Keep the file ending in a newline so our line is a line of its own.
    prefix = ""
    if target.exists() and target.stat().st_size:
        with target.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            prefix = "" if f.read(1) == b"\n" else "\n"
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(f"{prefix}{host_pattern(host, port)} {public}\n")


class HostKeyPolicy:
    """What to do with a host key known_hosts does not trust: ask, accept, or refuse."""

    def __init__(
        self,
        known_hosts: Sequence[str],
        *,
        confirm: HostKeyConfirm | None = None,
        accept_new: bool = False,
        write_to: str | None = None,
    ) -> None:
        self.known_hosts = list(known_hosts)
        self.confirm = confirm
        self.accept_new = accept_new
        # Where an accepted key is written: the first known_hosts file unless told.
        self.write_to = write_to or (
            self.known_hosts[0] if self.known_hosts else DEFAULT_KNOWN_HOSTS
        )

    async def resolve(self, node: str, presented: PresentedKey) -> None:
        """Accept an unknown key (appending it) or raise HostKeyError with the remedy."""
        host, port, fp = presented.host, presented.port, presented.fingerprint
        pattern = host_pattern(host, port)
        on_record = known_keys(self.known_hosts, host, presented.addr, port)
        if on_record:
            old = ", ".join(sorted({fingerprint(k) for k in on_record}))
            raise HostKeyError(
                f"{node}: the host key of {pattern} has CHANGED: it presented {fp}, "
                f"known_hosts has {old}. Someone may be intercepting the connection, "
                "or the node was reinstalled",
                f"check the new key on the node itself (`ssh-keygen -lf "
                f"/etc/ssh/ssh_host_ed25519_key.pub`); only if it shows {fp}, remove the old "
                f"entry with `ssh-keygen -R '{pattern}' -f {self.write_to}` and connect again",
            )
        accepted = self.accept_new
        if not accepted and self.confirm is not None:
            accepted = bool(await self.confirm(pattern, fp))
        if not accepted:
            raise HostKeyError(
                f"{node}: the host key of {pattern} is not in known_hosts ({fp})",
                "check that fingerprint on the node (`ssh-keygen -lf "
                "/etc/ssh/ssh_host_ed25519_key.pub`), then run again with "
                "--accept-new-host-keys (or `ssh` to it once and answer yes)",
            )
        append_known_host(self.write_to, host, port, presented.key)

"""A simulated container's log: timestamped lines, followable, in Docker's stream formats."""

from __future__ import annotations

import asyncio
import json
import struct
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

STDOUT = 1
STDERR = 2


@dataclass(frozen=True)
class LogEntry:
    """One line of output: when it arrived (ns since the epoch), which stream, its bytes."""

    ts_ns: int
    stream: int
    data: bytes


def rfc3339_nano(ts_ns: int) -> str:
    """Docker's fixed-width RFC 3339 timestamp with nanoseconds (RFC3339NanoFixed)."""
    secs, nanos = divmod(ts_ns, 1_000_000_000)
    base = datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{nanos:09d}Z"


def parse_unix_ns(value: str) -> int:
    """Docker's `since`/`until`: unix seconds with an optional fraction, exactly, in ns."""
    value = value.strip()
    whole, _, frac = value.partition(".")
    if not whole.lstrip("-").isdigit() or (frac and not frac.isdigit()):
        raise ValueError(f"invalid timestamp {value!r}")
    return int(whole) * 1_000_000_000 + int((frac + "000000000")[:9] or 0)


def frame(stream: int, payload: bytes) -> bytes:
    """One frame of Docker's multiplexed stream: [stream, 0, 0, 0, size (u32 BE)] + payload."""
    return struct.pack(">BxxxL", stream, len(payload)) + payload


class LogBuffer:
    """Every line a container wrote, kept until the container is removed.

    Timestamps are unique and strictly increasing (at least 1 us apart), so a follower can
    resume with `since` = the last timestamp it saw (Docker returns lines at or after
    `since`) and drop the lines whose timestamp is not after it: nothing lost, nothing twice.
    Lines are also appended to a json-file log (Docker's format) at `path`.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.entries: list[LogEntry] = []
        self.path = path
        self._last_ns = 0
        self._closed = True  # nothing runs yet: a follower of a created container ends at once
        self._changed = asyncio.Event()

    def append(self, stream: int, data: bytes) -> LogEntry:
        ts = max(time.time_ns(), self._last_ns + 1000)
        self._last_ns = ts
        entry = LogEntry(ts, stream, data)
        self.entries.append(entry)
        if self.path is not None:
            record = {
                "log": data.decode("utf-8", "replace"),
                "stream": "stdout" if stream == STDOUT else "stderr",
                "time": rfc3339_nano(ts),
            }
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        self._wake()
        return entry

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """No more lines will come (the process ended, or the container was removed)."""
        self._closed = True
        self._wake()

    def reopen(self) -> None:
        """The container started again: followers may wait for new lines."""
        self._closed = False

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_beyond(self, count: int) -> None:
        """Return once there are more than `count` entries or the log is closed."""
        while len(self.entries) <= count and not self._closed:
            await self._changed.wait()

    def start_index(self, tail: int | None) -> int:
        """Where a reader starts: the last `tail` lines (None = all)."""
        if tail is None:
            return 0
        return max(0, len(self.entries) - tail)

    @staticmethod
    def wanted(entry: LogEntry, since_ns: int | None, until_ns: int | None) -> bool:
        if since_ns is not None and entry.ts_ns < since_ns:
            return False
        return until_ns is None or entry.ts_ns <= until_ns


def encode(entry: LogEntry, timestamps: bool, multiplexed: bool = True) -> bytes:
    """An entry as Docker sends it on a logs stream (timestamps as a prefix when asked)."""
    payload = entry.data
    if timestamps:
        payload = rfc3339_nano(entry.ts_ns).encode() + b" " + payload
    return frame(entry.stream, payload) if multiplexed else payload

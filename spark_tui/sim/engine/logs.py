"""vLLM's log line format, written line by line and flushed (the log is streamed through docker).

`(APIServer pid=74) INFO 09-09 15:19:30 [api_utils.py:347] message` — the process prefix,
the level, month-day and time, the source file and line, the message. Logger lines go to
stdout (vLLM's handler), progress bars and raw tracebacks to stderr (tqdm, Python).
Headless workers print some lines without a prefix, as the real rank 1 log does.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO


def _stamp() -> str:
    return time.strftime("%m-%d %H:%M:%S")


def torch_stamp() -> str:
    """The timestamp of c10d/NCCL warning lines: `W1130 10:00:00.123456789`."""
    now = time.time()
    frac = int((now % 1) * 1e9)
    return time.strftime("%m%d %H:%M:%S", time.localtime(now)) + f".{frac:09d}"


class EngineLog:
    """Thread-safe writer of vLLM-format lines to stdout and stderr."""

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None) -> None:
        self._out = out if out is not None else sys.stdout
        self._err = err if err is not None else sys.stderr
        self._lock = threading.Lock()

    def write(self, text: str, stderr: bool = False) -> None:
        """Write text (already ending in a newline) and flush; a closed pipe is ignored."""
        stream = self._err if stderr else self._out
        with self._lock:
            try:
                stream.write(text)
                stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

    def channel(self, prefix: str | None) -> Channel:
        """A writer for one process role, e.g. `APIServer pid=74`."""
        return Channel(self, prefix)


class Channel:
    """Lines of one process role; the prefix can change (Worker -> Worker_TP0)."""

    def __init__(self, log: EngineLog, prefix: str | None) -> None:
        self.log = log
        self.prefix = prefix

    def _lead(self) -> str:
        return f"({self.prefix}) " if self.prefix else ""

    def line(self, level: str, source: str, message: str) -> None:
        """One logger line: `(prefix) LEVEL MM-DD HH:MM:SS [source] message`."""
        self.log.write(f"{self._lead()}{level} {_stamp()} [{source}] {message}\n")

    def info(self, source: str, message: str) -> None:
        """An INFO line."""
        self.line("INFO", source, message)

    def warning(self, source: str, message: str) -> None:
        """A WARNING line."""
        self.line("WARNING", source, message)

    def error(self, source: str, message: str) -> None:
        """An ERROR line."""
        self.line("ERROR", source, message)

    def error_block(self, source: str, lines: list[str]) -> None:
        """Several ERROR lines with the same source (a logged traceback)."""
        for text in lines:
            self.error(source, text)

    def raw(self, text: str, stderr: bool = False) -> None:
        """Lines printed outside the logger (uvicorn, tqdm, tracebacks), prefixed per line."""
        lead = self._lead()
        body = "".join(f"{lead}{part}\n" for part in text.split("\n"))
        self.log.write(body, stderr=stderr)

    def uvicorn(self, message: str) -> None:
        """A uvicorn line: `(APIServer pid=1) INFO:     message`."""
        self.raw(f"INFO:     {message}")


def tqdm_line(desc: str, done: int, total: int, elapsed: float, unit_s: bool = True) -> str:
    """A tqdm progress line as vLLM's loaders print it, e.g.
    `Loading safetensors checkpoint shards:  50% Completed | 1/2 [05:57<05:57, 357.35s/it]`."""
    pct = int(100 * done / total) if total else 100
    rate = elapsed / done if done else 0.0
    remaining = rate * (total - done) if done else 0.0
    if done == 0:
        tail = "?it/s"
        remaining_text = "?"
    else:
        if rate >= 1.0 or not unit_s:
            tail = f"{rate:.2f}s/it"
        else:
            tail = f"{(1.0 / rate) if rate > 0 else 0.0:5.2f}it/s"
        remaining_text = _mmss(remaining)
    return (
        f"{desc}: {pct:3d}% Completed | {done}/{total} [{_mmss(elapsed)}<{remaining_text}, {tail}]"
    )


def tqdm_bar(desc: str, done: int, total: int, elapsed: float) -> str:
    """A tqdm bar line as the CUDA graph capture prints it, e.g.
    `Capturing CUDA graphs (decode, FULL):  57%|█████▋    | 20/35 [00:01<00:00, 18.05it/s]`."""
    frac = done / total if total else 1.0
    width = 10
    full = int(frac * width)
    partials = " ▏▎▍▌▋▊▉"
    rest = int((frac * width - full) * 8)
    bar = "█" * full + (partials[rest] if full < width and rest else "")
    bar = bar.ljust(width)
    rate = done / elapsed if elapsed > 0 and done else 0.0
    remaining = (total - done) / rate if rate > 0 else 0.0
    rate_text = f"{rate:5.2f}it/s" if done else "?it/s"
    left = _mmss(remaining) if done else "?"
    return f"{desc}: {int(frac * 100):3d}%|{bar}| {done}/{total} [{_mmss(elapsed)}<{left}, {rate_text}]"


def _mmss(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"

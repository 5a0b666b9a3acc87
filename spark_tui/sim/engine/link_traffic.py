"""What a simulated rank would send over the cluster link (simulated: no bytes move), so a
simulated node's interface counters rise with the engine's work as a real Spark's do.

Per token of prefill or decode, tensor parallelism all-reduces the hidden state (bf16) twice
per layer, and a ring all-reduce over `tp` ranks sends 2 (tp - 1) / tp of it from every rank
(and receives as much); pipeline parallelism sends the hidden state once per stage boundary.
The head, which schedules every token, writes the running total to SPARK_SIM_LINK_FILE; the
node adds it to the counters of every rank's interface.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

BF16_BYTES = 2


def bytes_per_token(hidden_size: int, layers: int, tp: int, pp: int) -> int:
    """Bytes one rank sends (and receives) over the link per token the engine processes."""
    hidden = hidden_size * BF16_BYTES
    tensor = 2 * layers * hidden * 2 * (tp - 1) / tp if tp > 1 else 0.0
    pipeline = hidden if pp > 1 else 0
    return int(tensor + pipeline)


def write_total(path: str, total: int) -> None:
    """The running total, replaced whole so a reader never sees half a number."""
    tmp = f"{path}.tmp"
    with contextlib.suppress(OSError):
        with open(tmp, "w") as f:
            f.write(f"{total}\n")
        os.replace(tmp, path)


def link_loop(
    path: str, tokens: Callable[[], int], per_token: int, stop: threading.Event, interval: float
) -> None:
    """Write `tokens() * per_token` to `path` every `interval` seconds until `stop`."""
    last = -1
    while True:
        total = tokens() * per_token
        if total != last:
            write_total(path, total)
            last = total
        if stop.wait(interval):
            return

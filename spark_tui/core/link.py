"""Link and memory figures from counters: which interfaces the ranks use, rates from two
readings of /sys/class/net/IF/statistics, and the summary a benchmark keeps.

Rates are bytes per second (GB/s shown as 1e9 bytes/s); a link's share compares the busier
direction with the interface's speed (its /sys/class/net/IF/speed, in Mb/s, as the probe
reads it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# The variables that name the interface a rank's NCCL and Gloo traffic goes over.
RANK_INTERFACE_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
# What Linux allows in an interface name (no '/', no whitespace, at most 15 bytes); anything
# else never reaches the sampling command.
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
GB = 1e9
# A 64-bit kernel keeps 64-bit counters; a 32-bit one wraps them at 2**32.
_WRAP_32 = 2**32
_WRAP_64 = 2**64
# A delta faster than this share of the link's speed is not traffic: the counter was reset
# (the interface re-created, the driver reloaded).
_RESET_SHARE = 1.5


def valid_interface(name: str) -> bool:
    """Whether `name` can be a Linux interface name."""
    return bool(_IFNAME.match(name)) and name not in (".", "..")


def rank_interfaces(env: Mapping[str, str]) -> list[str]:
    """The interfaces a rank's environment sends NCCL and Gloo traffic over, in the order
    named, without repeats. NCCL's `^name` (exclude) lists name no interface to watch, and
    its `=name` (exact match) prefix is dropped; names that cannot be interfaces are left out."""
    found: list[str] = []
    for var in RANK_INTERFACE_VARS:
        value = env.get(var, "").strip()
        if not value or value.startswith("^"):
            continue
        for part in value.split(","):
            name = part.strip().removeprefix("=")
            if valid_interface(name) and name not in found:
                found.append(name)
    return found


def env_of(items: Iterable[str]) -> dict[str, str]:
    """Docker's `KEY=VALUE` environment list as a mapping."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if sep:
            out[key] = value
    return out


@dataclass(frozen=True)
class InterfaceCounters:
    """One reading of an interface: bytes received and sent since boot, its speed in Mb/s
    (None when the kernel gives none: a link that is down, a virtual one)."""

    interface: str
    rx_bytes: int
    tx_bytes: int
    speed_mbps: int | None = None


@dataclass(frozen=True)
class NodeReading:
    """One sample of a node: its uptime (the clock rates are taken on), memory in bytes and
    the counters of the interfaces asked for (`missing`: asked for, not there)."""

    uptime_s: float | None
    mem_total: int | None
    mem_available: int | None
    interfaces: tuple[InterfaceCounters, ...] = ()
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class InterfaceRate:
    """Traffic of one interface between two readings, in bytes/s (None: not measurable this
    time, e.g. the counter was reset); `speed_bytes_per_s` None when the speed is unknown."""

    interface: str
    rx_bytes_per_s: float | None
    tx_bytes_per_s: float | None
    speed_bytes_per_s: float | None = None
    rx_bytes: int = 0  # the counters at the later reading
    tx_bytes: int = 0

    @property
    def share(self) -> float | None:
        """The busier direction as a share of the link's speed (0..1)."""
        busiest = max(
            (r for r in (self.rx_bytes_per_s, self.tx_bytes_per_s) if r is not None), default=None
        )
        if busiest is None or not self.speed_bytes_per_s:
            return None
        return busiest / self.speed_bytes_per_s


def speed_bytes_per_s(speed_mbps: int | None) -> float | None:
    """A link speed in Mb/s (the kernel's unit) as bytes/s; None when unknown (<= 0)."""
    if speed_mbps is None or speed_mbps <= 0:
        return None
    return speed_mbps * 1e6 / 8


def counter_delta(before: int, after: int, dt: float, speed: float | None) -> float | None:
    """Bytes/s between two readings of one counter over `dt` seconds. A counter that went
    down wrapped (at 2**32 when it was below it, else at 2**64) unless the result is faster
    than the link can be, then it was reset: None."""
    if dt <= 0:
        return None
    if after >= before:
        delta = after - before
    else:
        delta = after + (_WRAP_32 if before < _WRAP_32 else _WRAP_64) - before
    rate = delta / dt
    if after < before and (speed is None or rate > speed * _RESET_SHARE):
        return None
    return rate


def rates(before: NodeReading, after: NodeReading) -> tuple[InterfaceRate, ...]:
    """Each interface's traffic between two readings of one node, in `after`'s order."""
    if before.uptime_s is None or after.uptime_s is None:
        dt = 0.0
    else:
        dt = after.uptime_s - before.uptime_s
    earlier = {c.interface: c for c in before.interfaces}
    out = []
    for c in after.interfaces:
        speed = speed_bytes_per_s(c.speed_mbps)
        prev = earlier.get(c.interface)
        rx = tx = None
        if prev is not None and dt > 0:
            rx = counter_delta(prev.rx_bytes, c.rx_bytes, dt, speed)
            tx = counter_delta(prev.tx_bytes, c.tx_bytes, dt, speed)
        out.append(InterfaceRate(c.interface, rx, tx, speed, c.rx_bytes, c.tx_bytes))
    return tuple(out)


@dataclass
class _Series:
    values: list[float] = field(default_factory=list)

    def add(self, value: float | None) -> None:
        if value is not None:
            self.values.append(value)

    @property
    def peak(self) -> float | None:
        return max(self.values, default=None)

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None


@dataclass(frozen=True)
class LinkFigure:
    """One interface of one node over a run: peak and mean GB/s each way, the peak share of
    the link's speed, and how many samples they come from."""

    node: str
    interface: str
    rx_peak_gbs: float | None
    rx_mean_gbs: float | None
    tx_peak_gbs: float | None
    tx_mean_gbs: float | None
    speed_gbs: float | None
    peak_share: float | None
    rx_bytes: int  # bytes received and sent over the run (the counters' rise)
    tx_bytes: int
    samples: int


@dataclass(frozen=True)
class MemoryFigure:
    """One node's memory over a run: total, and the least available seen, in bytes."""

    node: str
    total: int | None
    min_available: int | None
    samples: int


@dataclass
class LinkSummary:
    """Accumulates rates and memory readings of every node (see `add`), summed up by
    `links()` and `memory()`."""

    _rx: dict[tuple[str, str], _Series] = field(default_factory=dict)
    _tx: dict[tuple[str, str], _Series] = field(default_factory=dict)
    _share: dict[tuple[str, str], _Series] = field(default_factory=dict)
    _speed: dict[tuple[str, str], float | None] = field(default_factory=dict)
    _first: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    _last: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    _mem_total: dict[str, int | None] = field(default_factory=dict)
    _mem_min: dict[str, int | None] = field(default_factory=dict)
    _mem_samples: dict[str, int] = field(default_factory=dict)

    def add(
        self,
        node: str,
        mem_total: int | None,
        mem_available: int | None,
        interfaces: Iterable[InterfaceRate],
    ) -> None:
        """One sample of `node`."""
        self._mem_samples[node] = self._mem_samples.get(node, 0) + 1
        if mem_total is not None:
            self._mem_total[node] = mem_total
        else:
            self._mem_total.setdefault(node, None)
        if mem_available is not None:
            low = self._mem_min.get(node)
            self._mem_min[node] = mem_available if low is None else min(low, mem_available)
        else:
            self._mem_min.setdefault(node, None)
        for r in interfaces:
            key = (node, r.interface)
            self._rx.setdefault(key, _Series()).add(r.rx_bytes_per_s)
            self._tx.setdefault(key, _Series()).add(r.tx_bytes_per_s)
            self._share.setdefault(key, _Series()).add(r.share)
            self._speed[key] = r.speed_bytes_per_s
            self._first.setdefault(key, (r.rx_bytes, r.tx_bytes))
            self._last[key] = (r.rx_bytes, r.tx_bytes)

    def links(self) -> list[LinkFigure]:
        """Every node's interfaces, in the order first seen."""
        out = []
        for key, rx in self._rx.items():
            tx, share, speed = self._tx[key], self._share[key], self._speed.get(key)
            (rx0, tx0), (rx1, tx1) = self._first[key], self._last[key]
            out.append(
                LinkFigure(
                    node=key[0],
                    interface=key[1],
                    rx_peak_gbs=_gbs(rx.peak),
                    rx_mean_gbs=_gbs(rx.mean),
                    tx_peak_gbs=_gbs(tx.peak),
                    tx_mean_gbs=_gbs(tx.mean),
                    speed_gbs=_gbs(speed),
                    peak_share=share.peak,
                    rx_bytes=max(0, rx1 - rx0),
                    tx_bytes=max(0, tx1 - tx0),
                    samples=len(rx.values),
                )
            )
        return out

    def memory(self) -> list[MemoryFigure]:
        """Every node sampled, in the order first seen."""
        return [
            MemoryFigure(node, self._mem_total.get(node), self._mem_min.get(node), n)
            for node, n in self._mem_samples.items()
        ]


def _gbs(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else bytes_per_s / GB


def fmt_gbs(bytes_per_s: float | None) -> str:
    """A rate as GB/s with the digits that matter at link speeds ("–" when unknown)."""
    if bytes_per_s is None:
        return "–"
    gbs = bytes_per_s / GB
    return f"{gbs:.2f}" if gbs >= 0.1 else f"{gbs:.3f}"


def fmt_share(share: float | None) -> str:
    """A share of a link's speed as a percentage ("–" when the speed is unknown)."""
    if share is None:
        return "–"
    return f"{share * 100:.1f}%" if share < 0.1 else f"{share * 100:.0f}%"

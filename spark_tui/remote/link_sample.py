"""One command per sample of a node's memory and interface counters, and its parser.

`grep -H . FILE...` prints every non-empty line of each file prefixed with its path, so one
command reads /proc/uptime (the node's clock the rates are taken on), /proc/meminfo and each
interface's rx/tx byte counters and speed, and the output says which line came from where.
A file the kernel will not read (the speed of a link that is down: EINVAL) or that is not
there (an interface of another name) only goes to stderr.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from spark_tui.core.errors import InputError
from spark_tui.core.link import InterfaceCounters, NodeReading, valid_interface
from spark_tui.remote.parsers import parse_meminfo

UPTIME = "/proc/uptime"
MEMINFO = "/proc/meminfo"
_NET = "/sys/class/net/"
# The command's fixed start: a simulated node recognises the sample by it.
COMMAND_START = f"grep -H . {UPTIME} {MEMINFO}"


def interface_paths(interface: str) -> tuple[str, str, str]:
    """The files read for one interface: rx bytes, tx bytes, speed (Mb/s)."""
    base = f"{_NET}{interface}"
    return (f"{base}/statistics/rx_bytes", f"{base}/statistics/tx_bytes", f"{base}/speed")


def sample_command(interfaces: Sequence[str]) -> str:
    """The command that reads one sample of a node watching `interfaces`."""
    for name in interfaces:
        if not valid_interface(name):
            raise InputError(
                f"{name!r} is not an interface name",
                "set NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME to the node's ConnectX netdev "
                "(as `ibdev2netdev` lists it)",
            )
    paths = [p for name in interfaces for p in interface_paths(name)]
    return " ".join([COMMAND_START, *(shlex.quote(p) for p in paths)])


def interfaces_of(command: str) -> list[str]:
    """The interfaces a sample command reads (what a simulated node answers for)."""
    names: list[str] = []
    for word in shlex.split(command):
        if word.startswith(_NET) and word.endswith("/statistics/rx_bytes"):
            names.append(word[len(_NET) : -len("/statistics/rx_bytes")])
    return names


def parse_sample(text: str, interfaces: Sequence[str]) -> NodeReading:
    """A sample command's stdout as a reading of the interfaces asked for."""
    meminfo: list[str] = []
    uptime: float | None = None
    values: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        path, sep, value = line.partition(":")
        if not sep:
            continue
        if path == MEMINFO:
            meminfo.append(value)
        elif path == UPTIME:
            try:
                uptime = float(value.split()[0])
            except (ValueError, IndexError):
                uptime = None
        elif path.startswith(_NET):
            name, _, leaf = path[len(_NET) :].partition("/")
            try:
                number = int(value.strip())
            except ValueError:
                continue
            values.setdefault(name, {})[leaf.removeprefix("statistics/")] = number
    mem = parse_meminfo("\n".join(meminfo))
    found: list[InterfaceCounters] = []
    missing: list[str] = []
    for name in interfaces:
        v = values.get(name, {})
        if "rx_bytes" not in v or "tx_bytes" not in v:
            missing.append(name)
            continue
        found.append(InterfaceCounters(name, v["rx_bytes"], v["tx_bytes"], v.get("speed")))
    return NodeReading(uptime, mem.total, mem.available, tuple(found), tuple(missing))

"""What `ray status` says about a forming Ray cluster: the active nodes and the resources.

Built against the output of real `ray status` (Ray 2.60): a "Node status" block listing
`Active:` nodes (`1 node_<id>` each), `Pending:` and `Recent failures:`, then a
"Resources" block of `used/total NAME` lines under `Total Usage:`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NODE = re.compile(r"^\s*(\d+)\s+(node_[0-9a-f]+|[\w.-]+)\s*$")
_USAGE = re.compile(r"^\s*([\d.]+)([KMGT]?i?B)?/([\d.]+)([KMGT]?i?B)?\s+(\S+)")
_OTHER_HEADERS = (
    "Node status",
    "Resources",
    "Total Constraints",
    "Total Demands",
    "Pending Demands",
    "From request_resources",
    "========",
)
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


@dataclass(frozen=True)
class RayStatus:
    """Active and pending node counts, failures and the cluster's total resources."""

    active: int = 0
    pending: int = 0
    failures: tuple[str, ...] = ()
    resources: dict[str, float] = field(default_factory=dict)


def _amount(value: str, unit: str | None) -> float:
    return float(value) * _UNITS.get(unit or "B", 1)


def parse_ray_status(text: str) -> RayStatus:
    """The node counts and total resources of `ray status` output (empty when unparsable)."""
    section = ""
    active = pending = 0
    failures: list[str] = []
    resources: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.rstrip()
        head = line.strip()
        if head in ("Active:", "Pending:", "Recent failures:", "Total Usage:"):
            section = head
            continue
        if head.startswith(_OTHER_HEADERS) or (head and set(head) <= {"-", "="}):
            section = ""  # a header or rule of another block ends the current list
            continue
        if not head or head.startswith("(no"):
            continue
        if section == "Active:":
            m = _NODE.match(line)
            if m:
                active += int(m.group(1))
        elif section == "Pending:":
            m = _NODE.match(line)
            if m:
                pending += int(m.group(1))
        elif section == "Recent failures:":
            failures.append(head)
        elif section == "Total Usage:":
            m = _USAGE.match(line)
            if m:
                resources[m.group(5)] = _amount(m.group(3), m.group(4))
    return RayStatus(active, pending, tuple(failures), resources)


def listening_ports(proc_net_tcp: str) -> set[int]:
    """The TCP ports in LISTEN state in /proc/net/tcp (and tcp6) text."""
    ports: set[int] = set()
    for line in proc_net_tcp.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[3] != "0A" or ":" not in fields[1]:
            continue  # the header, or not a listening socket
        try:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except ValueError:
            continue
    return ports


__all__ = ["RayStatus", "listening_ports", "parse_ray_status"]

"""Inventory files: the nodes to talk to, head first (YAML `nodes: [{name, host, ...}]`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import yaml

from spark_tui.core import safe_yaml
from spark_tui.core.errors import FactsError


@dataclass
class InventoryNode:
    """How to reach one node over SSH. `host` may be an alias from ~/.ssh/config."""

    name: str
    host: str
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def parse_inventory(text: str, source: str = "<inventory>") -> list[InventoryNode]:
    """Parse inventory YAML into nodes in rank order."""
    try:
        data = safe_yaml.load(text)
    except yaml.YAMLError as exc:
        line, column, problem = safe_yaml.error_location(exc)
        where = f"{source}:{line}:{column}" if line is not None else source
        raise FactsError(
            f"{where}: not valid YAML ({problem})", "fix the syntax at that position"
        ) from None
    entries = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise FactsError(
            f'{source}: no "nodes" list',
            "write nodes: [{name: spark-a, host: 10.0.0.1}, {name: spark-b, host: 10.0.0.2}]",
        )
    nodes: list[InventoryNode] = []
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            entry = {"name": entry, "host": entry}
        if not isinstance(entry, dict) or not entry.get("host"):
            raise FactsError(f"{source}: node {i + 1} has no host", "give every node a `host`")
        port = entry.get("port")
        if port is not None and (
            not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536
        ):
            raise FactsError(
                f"{source}: node {i + 1}: port must be an integer from 1 to 65535",
                "write port: 22",
            )
        nodes.append(
            InventoryNode(
                name=str(entry.get("name") or entry["host"]),
                host=str(entry["host"]),
                port=port,
                user=entry.get("user"),
                identity_file=entry.get("identity_file"),
                known_hosts=entry.get("known_hosts"),
            )
        )
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise FactsError(f"{source}: node names repeat: {names}", "give every node its own name")
    return nodes


def hosts_to_inventory(hosts: str) -> list[InventoryNode]:
    """Turn `--hosts a,b` (each `[user@]host[:port]`) into inventory nodes."""
    nodes: list[InventoryNode] = []
    for raw in [h.strip() for h in hosts.split(",") if h.strip()]:
        user, _, hostport = raw.rpartition("@")
        host, _, port = hostport.partition(":")
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise FactsError(
                f"--hosts {raw!r}: the port must be a number from 1 to 65535",
                "write host or host:port, e.g. --hosts spark-a,spark-b:2222",
            )
        name = hostport if any(n.host == host for n in nodes) else host
        nodes.append(
            InventoryNode(name=name, host=host, user=user or None, port=int(port) if port else None)
        )
    if not nodes:
        raise FactsError("--hosts is empty", "pass --hosts spark-a,spark-b (head first)")
    return nodes


def inventory_to_yaml(nodes: list[InventoryNode]) -> str:
    """Render nodes as an inventory file."""
    return str(yaml.safe_dump({"nodes": [n.to_dict() for n in nodes]}, sort_keys=False))

"""`spark-tui probe (--inventory FILE | --hosts ...) [--json]`: what every node has.

`--json` prints the facts-file format (`check`/`plan --facts` read it). A node that
cannot be reached is named on stderr with its reason and remedy (exit 3); the facts of
the nodes that answered are still printed, the unreachable one with its error.
"""

from __future__ import annotations

import argparse
import sys

from spark_tui.commands.interrupts import run_command
from spark_tui.core.errors import EXIT_OK, EXIT_UNREACHABLE
from spark_tui.core.facts import GIB, NodeFacts, facts_to_json
from spark_tui.core.wiring import wiring_of


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f} GiB"


def summary(nodes: list[NodeFacts]) -> str:
    """The human view of the facts: one block per node, head first."""
    lines: list[str] = []
    for i, n in enumerate(nodes):
        role = "head" if i == 0 else "worker"
        lines.append(f"{n.name}  ({role}, {n.address}{', ' + n.hostname if n.hostname else ''})")
        if n.memory_total_bytes is None and n.errors and not n.gpu_name:
            lines += [f"  error   {e}" for e in n.errors]
            lines.append("")
            continue
        gpu = n.gpu_name or "no GPU found"
        lines.append(
            f"  gpu     {gpu}  driver {n.driver_version or '?'}  CUDA {n.cuda_version or '?'}"
            f"  arch {n.arch or '?'}"
        )
        lines.append(
            f"  memory  {_gib(n.memory_total_bytes)} total, {_gib(n.memory_available_bytes)} "
            f"available, {_gib(n.page_cache_bytes)} page cache"
        )
        lines.append(f"  disk    {_gib(n.disk_free_bytes)} free for the model cache")
        up = n.connectx_up
        if up:
            for iface in up:
                speed = f"{iface.speed_mbps // 1000}G" if iface.speed_mbps else "?"
                lines.append(
                    f"  cx7     {iface.netdev} ({iface.rdma_device}) up {speed}"
                    f"  {iface.ipv4 or 'no IPv4'}"
                )
        else:
            lines.append("  cx7     no ConnectX port is up")
        lines.append(f"  docker  {n.docker_version or '?'}, {len(n.images)} image(s)")
        for m in n.models:
            size = _gib(m.weight_bytes or m.size_bytes)
            lines.append(f"  model   {m.repo_id}@{(m.revision or '?')[:8]}  {size}")
        for c in n.containers:
            lines.append(f"  ours    {c.name}  {c.state}")
        lines += [f"  note    {e}" for e in n.errors]
        lines.append("")
    if len(nodes) > 1:
        wiring = wiring_of(nodes)
        lines.append(f"wiring  {wiring.summary}")
        for line in wiring.describe():
            lines += _wrapped(f"  link    {line}")
    return "\n".join(lines).rstrip() + "\n"


def _wrapped(line: str, width: int = 80) -> list[str]:
    """A link line within an 80-column terminal: wrapped between its parts (each node's end
    of the link, the speed, ...: they are two spaces apart), never inside one."""
    if len(line) <= width:
        return [line]
    head, *parts = line.split("  link    ", 1)[-1].split("  ")
    out, current = [], f"  link    {head}"
    for part in parts:
        if len(current) + 2 + len(part) > width:
            out.append(current)
            current = " " * 10 + part
        else:
            current += "  " + part
    return [*out, current]


async def _probe(args: argparse.Namespace) -> tuple[list[NodeFacts], list[str]]:
    from spark_tui.commands.terminal import consume, session
    from spark_tui.service.events import Probed

    s = session(args)
    print(f"probing {len(s.inventory)} node(s)...", file=sys.stderr, flush=True)
    try:
        seen = await consume(s.discover(), on_event=lambda _e: None)
    finally:
        await s.close()
    probed = next(e for e in seen if isinstance(e, Probed))
    failed = [f"{msg}\n  remedy: {fix}" for msg, fix in probed.errors.values()]
    return probed.nodes, failed


def run(args: argparse.Namespace) -> int:
    facts, failed = run_command(lambda: _probe(args))
    if args.json:
        print(facts_to_json(facts))
    else:
        print(summary(facts), end="")
    for message in failed:
        print(f"spark-tui: {message}", file=sys.stderr)
    return EXIT_UNREACHABLE if failed else EXIT_OK

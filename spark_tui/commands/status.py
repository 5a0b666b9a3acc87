"""`spark-tui status (--inventory FILE | --hosts ...) [--json]`: our clusters on the nodes,
found from container labels (cluster id, recipe, ranks, their states and nodes), each with
its API endpoint and the SSH tunnel command that reaches it from this machine. A running
cluster says whether it is loading (how far each rank is) or ready (its API answers). A
cluster that is down says so: which rank failed, why, and the command that removes it (exit 1).
The session's status action finds and diagnoses them (see `service.status`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

from spark_tui.commands.interrupts import run_command
from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.core.images import image_line

if TYPE_CHECKING:
    from spark_tui.service.status import ClusterReport


async def _status(args: argparse.Namespace) -> list[ClusterReport]:
    from spark_tui.commands.terminal import session, targets

    s = session(args)
    try:
        return await s.status(cleanup=targets(args).command("stop", live=True))
    finally:
        await s.close()


def render_state(report: ClusterReport) -> tuple[str, list[str]]:
    """The state's word (a loading cluster's with its slowest rank's progress) and a line per
    loading rank saying how far it is."""
    ready = report.diagnosis.readiness
    if report.state != "loading" or ready is None:
        return report.state, []
    word = "loading" if ready.progress is None else f"loading {ready.progress:.0%}"
    lines = []
    for r in ready.ranks:
        done = "" if r.progress is None else f" ({r.progress:.0%})"
        lines.append(f"  loading: rank {r.rank} on {r.node} {r.detail or 'starting'}{done}")
    return word, lines


def render_diagnosis(report: ClusterReport) -> list[str]:
    """The lines that say why a cluster failed and how to clean it up."""
    diag = report.diagnosis
    out: list[str] = []
    for i, f in enumerate(diag.failed):
        lead = "failed" if i == 0 else "then"
        out.append(f"  {lead}: rank {f.rank} on {f.node} {f.reason}")
        out += [f"    | {line}" for line in f.lines]
    if diag.head_lines:
        out.append("  the head says:")
        out += [f"    | {line}" for line in diag.head_lines]
    if diag.cleanup:
        out.append(f"  clean up: {diag.cleanup}")
    return out


def run(args: argparse.Namespace) -> int:
    found = run_command(lambda: _status(args))
    code = EXIT_FAILED if any(r.failed for r in found) else EXIT_OK
    if args.json:
        clusters = []
        for r in found:
            data = {**r.cluster.to_dict(), "endpoint": asdict(r.endpoint)}
            ready = r.diagnosis.readiness
            data["state"] = r.state
            data["progress"] = ready.progress if ready is not None else None
            data["readiness"] = ready.to_dict() if ready is not None else None
            data["diagnosis"] = r.diagnosis.to_dict() if r.failed else None
            clusters.append(data)
        print(json.dumps({"clusters": clusters}, indent=2))
        return code
    if not found:
        print("no spark-tui containers on these nodes", file=sys.stderr)
        return EXIT_OK
    for r in found:
        c, endpoint = r.cluster, r.endpoint
        state, loading = render_state(r)
        print(
            f"cluster {c.cluster_id}  {c.recipe or '?'}  {state}  "
            f"settings {c.settings_hash or '?'}  model {c.model or '?'}"
        )
        for rank in c.ranks:
            print(
                f"  rank {rank.rank}  {rank.node:<16} {rank.role or '?':<7} {rank.container}  "
                f"{rank.status}"
            )
        for line in loading:
            print(line)
        head = min(c.ranks, key=lambda r: r.rank, default=None)
        if head is not None:
            print(f"  image   {image_line(head.image, head.labels)}")
        print(f"  API     {endpoint.api_url}  (on {endpoint.head})")
        print(f"  tunnel  {endpoint.tunnel}")
        local = endpoint.tunnel_port or endpoint.api_url.rsplit(":", 1)[-1].split("/")[0]
        print(f"          then http://127.0.0.1:{local}/v1")
        if r.failed:
            print("\n".join(render_diagnosis(r)))
    return code

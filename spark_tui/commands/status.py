"""`spark-tui status (--inventory FILE | --hosts ...) [--json]`: our clusters on the nodes,
found from container labels (cluster id, recipe, ranks, their states and nodes), each with
its API endpoint and the SSH tunnel command that reaches it from this machine. A cluster
that is down says so: which rank failed, why, and the command that removes it (exit 1)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from spark_tui.commands._interrupts import run_command
from spark_tui.core.errors import EXIT_FAILED, EXIT_OK
from spark_tui.core.images import image_line

if TYPE_CHECKING:
    from spark_tui.ops.diagnose import ClusterDiagnosis


async def _status(args: argparse.Namespace) -> list[Any]:
    from spark_tui.commands.terminal import session, targets
    from spark_tui.ops.cluster import close_dockers, open_dockers
    from spark_tui.ops.diagnose import diagnose

    cleanup = targets(args).command("stop", live=True)
    s = session(args)
    try:
        found = await s.status()
        diagnoses = []
        if found and s.pool is not None:
            dockers = await open_dockers(s.pool)
            try:
                diagnoses = [await diagnose(c, dockers, cleanup=cleanup) for c, _e in found]
            finally:
                await close_dockers(dockers)
    finally:
        await s.close()
    return [(c, e, d) for (c, e), d in zip(found, diagnoses, strict=True)]


def render_diagnosis(diag: ClusterDiagnosis) -> list[str]:
    """The lines that say why a cluster failed and how to clean it up."""
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
    code = EXIT_FAILED if any(d.state == "failed" for _c, _e, d in found) else EXIT_OK
    if args.json:
        clusters = []
        for c, e, d in found:
            data = {**c.to_dict(), "endpoint": asdict(e)}
            if d.state == "failed":
                data["state"] = "failed"
            data["diagnosis"] = d.to_dict() if d.state == "failed" else None
            clusters.append(data)
        print(json.dumps({"clusters": clusters}, indent=2))
        return code
    if not found:
        print("no spark-tui containers on these nodes", file=sys.stderr)
        return EXIT_OK
    for c, endpoint, d in found:
        state = "failed" if d.state == "failed" else c.state
        print(
            f"cluster {c.cluster_id}  {c.recipe or '?'}  {state}  "
            f"settings {c.settings_hash or '?'}  model {c.model or '?'}"
        )
        for r in c.ranks:
            print(f"  rank {r.rank}  {r.node:<16} {r.role or '?':<7} {r.container}  {r.status}")
        head = min(c.ranks, key=lambda r: r.rank, default=None)
        if head is not None:
            print(f"  image   {image_line(head.image, head.labels)}")
        print(f"  API     {endpoint.api_url}  (on {endpoint.head})")
        print(f"  tunnel  {endpoint.tunnel}")
        print(f"          then http://127.0.0.1:{endpoint.api_url.rsplit(':', 1)[-1]}")
        if d.state == "failed":
            print("\n".join(render_diagnosis(d)))
    return code

"""`spark-tui smoke`: health, models, chat, tool-call and streaming checks of a running service."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from spark_tui.commands._interrupts import run_command
from spark_tui.core.errors import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, InputError
from spark_tui.ops.history import History, Run
from spark_tui.ops.smoke import SmokeResult, all_passed, iter_smoke, server_unreachable


@dataclass
class Target:
    """The API to check and what is known about the service behind it."""

    base_url: str
    via_cluster: bool = False
    model: str | None = None
    expect_reasoning: bool | None = None
    tool_call_parser: str | None = None
    launch: Run | None = None
    notes: list[str] = field(default_factory=list)


def _flag(argv: list[str], flag: str) -> str | None:
    for i, tok in enumerate(argv):
        if tok == flag and i + 1 < len(argv):
            return argv[i + 1]
        if tok.startswith(flag + "="):
            return tok.split("=", 1)[1]
    return None


def target_from_ranks(base_url: str, ranks: list[dict[str, Any]], history: History) -> Target:
    """What the head rank's argv says about the service (model, parsers), and its launch record."""
    head = next((r for r in ranks if int(r.get("rank", 0)) == 0), ranks[0] if ranks else {})
    argv = [str(a) for a in head.get("argv") or head.get("command") or []]
    t = Target(base_url, via_cluster=True)
    if len(argv) > 2 and argv[1] == "serve":
        t.model = _flag(argv, "--served-model-name") or argv[2]
    t.expect_reasoning = _flag(argv, "--reasoning-parser") is not None if argv else None
    t.tool_call_parser = _flag(argv, "--tool-call-parser")
    labels = head.get("labels") or {}
    cluster_id = labels.get("spark-tui.cluster") or head.get("cluster_id")
    launches = [r for r in history.list_runs("launch") if cluster_id and r.cluster_id == cluster_id]
    t.launch = launches[-1] if launches else None
    return t


@contextlib.asynccontextmanager
async def open_target(args: argparse.Namespace, history: History) -> AsyncIterator[Target]:
    """The API named by --base-url, or the running cluster's head through an SSH forward."""
    base_url = getattr(args, "base_url", None)
    if base_url:
        yield Target(base_url)
        return
    if not (getattr(args, "inventory", None) or getattr(args, "hosts", None)):
        raise InputError(
            "no server named",
            "pass --base-url URL (e.g. http://127.0.0.1:8000), or --inventory FILE / "
            "--hosts H1,H2 to find the running cluster",
        )
    # The remote layer (issue 4) finds our cluster from container labels and forwards the
    # head's API port over its SSH connection.
    try:
        from spark_tui.ops.attach import api_forward
    except ImportError as exc:
        raise InputError(
            "this build cannot reach a cluster over SSH (spark_tui.ops.attach is missing)",
            "forward the head's API port yourself (ssh -N -L 8000:127.0.0.1:8000 USER@HEAD) "
            "and pass --base-url http://127.0.0.1:8000",
        ) from exc

    async with api_forward(args) as found:
        yield target_from_ranks(found.base_url, list(found.ranks), history)


def _print_result(r: SmokeResult) -> None:
    print(r.summary(), flush=True)
    if not r.ok:
        if r.cause:
            print(f"           cause:  {r.cause}", flush=True)
        if r.remedy:
            print(f"           remedy: {r.remedy}", flush=True)


async def _run(args: argparse.Namespace, history: History) -> tuple[Target, list[SmokeResult]]:
    async with open_target(args, history) as target:
        results: list[SmokeResult] = []
        if not args.json:
            print(f"smoke checks against {target.base_url}", flush=True)
        async for r in iter_smoke(
            target.base_url,
            args.model or target.model,
            expect_reasoning=target.expect_reasoning,
            tool_call_parser=target.tool_call_parser,
            timeout=getattr(args, "timeout", None) or 180.0,
        ):
            results.append(r)
            if not args.json:
                _print_result(r)
        return target, results


def run(args: argparse.Namespace) -> int:
    history = History()
    target, results = run_command(lambda: _run(args, history))
    run_id = None
    try:
        rec = history.record_smoke(
            results, launch=target.launch, base_url=target.base_url, model=args.model
        )
        run_id = rec.id
    except OSError as exc:
        print(f"spark-tui: could not record the run in {history.root}: {exc}", file=sys.stderr)
    ok = all_passed(results)
    if args.json:
        out = {
            "base_url": target.base_url,
            "ok": ok,
            "run_id": run_id,
            "checks": [r.to_dict() for r in results],
        }
        print(json.dumps(out, indent=2))
    else:
        passed = sum(1 for r in results if r.ok)
        print(f"{passed}/{len(results)} checks passed" + (f" (run {run_id})" if run_id else ""))
    if ok:
        return EXIT_OK
    if target.via_cluster and server_unreachable(results):
        return EXIT_UNREACHABLE
    return EXIT_FAILED

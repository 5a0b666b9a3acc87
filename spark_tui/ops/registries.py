"""Clone or update the git registries spark-tui's config names, with the `git` CLI.

A registry is cloned once (`git clone --depth 1`, at its `ref` when one is given) into the
user cache (core.registry.registry_cache_dir) and updated on request (`git fetch` then a
hard reset to what was fetched, so a clone nobody edits always matches its remote). git
never prompts (GIT_TERMINAL_PROMPT=0), and every call has a timeout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_tui.core.errors import OperationFailed
from spark_tui.core.registry import Registry

GIT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class SyncResult:
    """What happened to one registry: "cloned", "updated", "present" or "failed"."""

    name: str
    action: str
    path: Path
    detail: str = ""


def _git(args: Sequence[str], cwd: Path | None = None, timeout: float = GIT_TIMEOUT_S) -> str:
    git = shutil.which("git")
    if git is None:
        raise OperationFailed(
            "git is not installed on this machine", "install git (e.g. `apt-get install git`)"
        )
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true")
    try:
        res = subprocess.run(
            [git, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise OperationFailed(
            f"git {args[0]} took longer than {timeout:g} s",
            "check the network and the registry URL, then try again",
        ) from None
    if res.returncode != 0:
        last = (res.stderr.strip() or res.stdout.strip()).splitlines()
        raise OperationFailed(
            f"git {args[0]} failed: {last[-1] if last else f'exit code {res.returncode}'}",
            "check the registry's `url` (and `ref`) in spark-tui's config, and that it is "
            "reachable from this machine",
        )
    return res.stdout


def clone(reg: Registry) -> None:
    """A shallow clone of the registry into its folder (a failed clone leaves no folder)."""
    reg.root.parent.mkdir(parents=True, exist_ok=True)
    partial = reg.root.with_name(reg.root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    args = ["clone", "--quiet", "--depth", "1"]
    if reg.ref:
        args += ["--branch", reg.ref]
    try:
        # `--` ends the options: a URL can never be read as one.
        _git([*args, "--", reg.url, str(partial)])
        partial.rename(reg.root)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def update(reg: Registry) -> None:
    """Fetch the registry's branch (or `ref`) and move the clone to it."""
    target = reg.ref or "HEAD"
    _git(["fetch", "--quiet", "--depth", "1", "origin", target], cwd=reg.root)
    _git(["reset", "--quiet", "--hard", "FETCH_HEAD"], cwd=reg.root)


def sync(registries: Sequence[Registry], *, update_existing: bool = False) -> list[SyncResult]:
    """Clone every missing registry; with `update_existing`, update the others too.
    A registry that fails is reported in its result, the others still go ahead."""
    out = []
    for reg in registries:
        try:
            if not (reg.root / ".git").exists():
                if reg.root.exists():
                    raise OperationFailed(
                        f"{reg.root} exists but is not a git clone",
                        f"remove that folder; spark-tui clones {reg.name} there",
                    )
                clone(reg)
                out.append(SyncResult(reg.name, "cloned", reg.root))
            elif update_existing:
                update(reg)
                out.append(SyncResult(reg.name, "updated", reg.root))
            else:
                out.append(SyncResult(reg.name, "present", reg.root))
        except OperationFailed as exc:
            out.append(SyncResult(reg.name, "failed", reg.root, f"{exc.message} ({exc.remedy})"))
    return out

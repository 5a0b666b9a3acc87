"""Start H4's SIMULATED engine (`python -m spark_tui.sim.engine serve ...`) as subprocesses.

A `SimService` runs one rank per argv on loopback (rank 0 serves the API), waits for
/health, and stops every process it started. Used by the ops and service tests in place of a cluster.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
# Fast startup, short token times: the tests measure ratios, not GB10 speed.
SIM_ENV = {"SPARK_SIM_PACE": "0.02", "SPARK_SIM_TOKEN_SCALE": "0.25"}


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (all held open together, so none repeats)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


def set_flag(argv: Sequence[str], flag: str, value: str | None) -> list[str]:
    """argv with `flag value` replaced, appended, or removed (value None)."""
    out: list[str] = []
    skip = False
    for i, tok in enumerate(argv):
        if skip:
            skip = False
            continue
        if tok == flag:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            skip = nxt is not None and not nxt.startswith("--")
            continue
        if tok.startswith(flag + "="):
            continue
        out.append(tok)
    if value is not None:
        out += [flag, value]
    return out


def drop_flags(argv: Sequence[str], *flags: str) -> list[str]:
    out = list(argv)
    for flag in flags:
        out = set_flag(out, flag, None)
    return out


def loopback_ranks(plan: Mapping[str, Any]) -> tuple[list[list[str]], int]:
    """The plan's per-rank argv moved onto loopback: API and rendezvous on 127.0.0.1."""
    api_port, rdv_port = free_ports(2)
    out = []
    for rank in sorted(plan["ranks"], key=lambda r: r["rank"]):
        argv = set_flag(rank["argv"], "--host", "127.0.0.1")
        argv = set_flag(argv, "--port", str(api_port))
        if "--master-addr" in argv:
            argv = set_flag(argv, "--master-addr", "127.0.0.1")
            argv = set_flag(argv, "--master-port", str(rdv_port))
        out.append(argv)
    return out, api_port


class SimService:
    """Simulated engine ranks as subprocesses; rank 0 serves the API."""

    def __init__(
        self, ranks: list[list[str]], port: int, log_dir: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.ranks = ranks
        self.port = port
        self.log_dir = log_dir
        self.env = {**os.environ, **SIM_ENV, "SPARK_SIM_BIND_ADDRESS": "127.0.0.1", **(env or {})}
        self.env["PYTHONPATH"] = str(ROOT) + os.pathsep + self.env.get("PYTHONPATH", "")
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self, rank: int = 0) -> str:
        path = self.log_dir / f"rank{rank}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, timeout: float = 30.0) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for i, argv in enumerate(self.ranks):
            assert argv[:2] == ["vllm", "serve"], argv
            with open(self.log_dir / f"rank{i}.log", "wb") as log:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "spark_tui.sim.engine", *argv[1:]],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=self.env,
                        cwd=str(ROOT),
                    )
                )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, p in enumerate(self.procs):
                if p.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"rank {i} exited {p.returncode}:\n{self.log(i)[-3000:]}")
            try:
                if httpx.get(self.base_url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"no /health 200 within {timeout} s:\n{self.log(0)[-3000:]}")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self.procs.clear()

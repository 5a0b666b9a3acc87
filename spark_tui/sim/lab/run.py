"""Running the host tools the lab needs: argv lists only, a timeout on every call."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from spark_tui.core.errors import OperationFailed


def _resolve(tool: str) -> str:
    """Find a tool in the sbin directories too (a non-login PATH may lack them)."""
    if "/" in tool:
        return tool
    from spark_tui.sim.lab.preflight import which

    return which(tool) or tool


def run(
    argv: Sequence[str | Path],
    *,
    timeout: float = 30.0,
    check: bool = True,
    input: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one command to completion (no terminal, no stdin unless given)."""
    args = [str(a) for a in argv]
    args[0] = _resolve(args[0])
    try:
        proc = subprocess.run(
            args,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise OperationFailed(
            f"`{' '.join(args)}` did not finish within {timeout:g} s",
            "run `spark-tui lab down` and try again; see the lab's logs in its state directory",
        ) from exc
    except FileNotFoundError as exc:
        raise OperationFailed(
            f"`{args[0]}` is not installed",
            "apt-get install -y openssh-server docker.io iproute2 busybox-static",
        ) from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise OperationFailed(
            f"`{' '.join(args)}` failed: {detail[-1] if detail else f'exit {proc.returncode}'}",
            "run `spark-tui lab down` and try again; see the lab's logs in its state directory",
        )
    return proc


def spawn_detached(
    argv: Sequence[str | Path], log: Path, env: dict[str, str] | None = None
) -> None:
    """Start a daemon that outlives this process (`setsid -f`): never our child, never a zombie."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [_resolve("setsid"), "-f", *[str(a) for a in argv]],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            close_fds=True,
        )
        # `setsid -f` forks the daemon and returns at once.
        proc.wait(timeout=10)


def wait_for(what: str, probe: Callable[[], bool], timeout: float, log: Path | None = None) -> None:
    """Poll `probe` until it is true; fail with the tail of `log` when it never is."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        try:
            if probe():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            break
        time.sleep(delay)
        delay = min(delay * 1.5, 0.2)
    tail = ""
    if log is not None and log.exists():
        lines = log.read_text(errors="replace").strip().splitlines()[-5:]
        tail = (": " + " | ".join(lines)) if lines else ""
    raise OperationFailed(
        f"{what} did not come up within {timeout:g} s{tail}",
        f"see {log} and run `spark-tui lab down`" if log else "run `spark-tui lab down`",
    )

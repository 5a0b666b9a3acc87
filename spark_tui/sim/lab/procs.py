"""Finding and ending the lab's processes: by namespace and cgroup, never by name."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

_CGROUP_ROOT = Path("/sys/fs/cgroup")


def ns_id(pid: int | str, kind: str) -> str | None:
    """The namespace of a process, as the kernel names it (`net:[4026532178]`)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def netns_file_id(path: Path) -> str | None:
    """The id of a named network namespace (`/run/netns/NAME`), in `ns_id`'s form."""
    try:
        return f"net:[{os.stat(path).st_ino}]"
    except OSError:
        return None


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the parenthesised command name, which may itself hold spaces.
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def pids_in_namespaces(ids: Iterable[str]) -> set[int]:
    """Every live process whose network or mount namespace is one of `ids`."""
    wanted = {i for i in ids if i}
    if not wanted:
        return set()
    found = set()
    own = os.getpid()
    for pid in _all_pids():
        if pid == own:
            continue
        if ns_id(pid, "net") in wanted or ns_id(pid, "mnt") in wanted:
            found.add(pid)
    return found


def cgroup_dirs(name: str) -> list[Path]:
    """The cgroup directories called `name` (one per v1 controller, or one on cgroup v2)."""
    dirs = []
    top = _CGROUP_ROOT / name
    if top.is_dir():
        dirs.append(top)
    try:
        controllers = [p for p in _CGROUP_ROOT.iterdir() if p.is_dir()]
    except OSError:
        controllers = []
    for ctrl in controllers:
        cand = ctrl / name
        if cand.is_dir() and (ctrl / "cgroup.procs").exists() and cand not in dirs:
            dirs.append(cand)
    return dirs


def pids_in_cgroups(name: str) -> set[int]:
    """Every process in the cgroup subtree `name` (the containers of one lab dockerd)."""
    found: set[int] = set()
    for top in cgroup_dirs(name):
        for procs in top.rglob("cgroup.procs"):
            try:
                found.update(int(x) for x in procs.read_text().split())
            except (OSError, ValueError):
                continue
    return {p for p in found if alive(p)}


def remove_cgroups(name: str) -> list[Path]:
    """Remove the (empty) cgroup subtrees `name`; return the ones that would not go."""
    left = []
    for top in cgroup_dirs(name):
        subdirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for d in [*subdirs, top]:
            try:
                d.rmdir()
            except OSError:
                left.append(d)
    return left


def signal_all(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def wait_gone(pids: Iterable[int], timeout: float) -> set[int]:
    """Wait until the processes are gone; return the ones still alive."""
    left = set(pids)
    deadline = time.monotonic() + timeout
    while left:
        left = {p for p in left if alive(p)}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return left


def terminate(pids: Iterable[int], grace: float = 3.0) -> set[int]:
    """SIGTERM, wait up to `grace` seconds, then SIGKILL; return any survivors."""
    pids = {p for p in pids if alive(p)}
    if not pids:
        return set()
    signal_all(pids, signal.SIGTERM)
    left = wait_gone(pids, grace)
    if left:
        signal_all(left, signal.SIGKILL)
        left = wait_gone(left, 3.0)
    return left


def read_pid(path: Path) -> int | None:
    """The pid in a pid file, or None when it is missing or stale."""
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if alive(pid) else None


def mounts_under(path: Path) -> list[str]:
    """Mount points (in this mount namespace) at or below `path`, deepest first."""
    root = str(path).rstrip("/")
    points = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        # mountinfo escapes spaces and the like as octal (\040).
        point = fields[4].encode().decode("unicode_escape")
        if point == root or point.startswith(root + "/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)

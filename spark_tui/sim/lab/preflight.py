"""What the lab needs from the host before it touches anything: Linux, root and the tools."""

from __future__ import annotations

import os
import shutil
import sys

from spark_tui.core.errors import SparkError

APT_PACKAGES = "openssh-server docker.io iproute2 busybox-static"

# Tool -> the Debian package that has it.
REQUIRED_TOOLS = {
    "ip": "iproute2",
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "setsid": "util-linux",
    "mount": "mount",
    "sshd": "openssh-server",
    "ssh-keygen": "openssh-client",
    "dockerd": "docker.io",
    "containerd": "containerd (docker.io)",
    "runc": "runc (docker.io)",
    "busybox": "busybox-static",
}
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def which(tool: str) -> str | None:
    """Find a tool on PATH or in the sbin directories a non-login PATH may lack."""
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(_SBIN)
    return shutil.which(tool, path=path)


def missing_tools() -> list[str]:
    """The required tools that are not installed, each with its package."""
    return [f"{tool} ({pkg})" for tool, pkg in REQUIRED_TOOLS.items() if which(tool) is None]


def unavailable_reason() -> str | None:
    """Why the lab cannot run here (not Linux, not root, tools missing), or None."""
    if not sys.platform.startswith("linux"):
        return f"the lab needs Linux network namespaces; this is {sys.platform}"
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, mounts, dockerd)"
    missing = missing_tools()
    if missing:
        return "the lab needs tools that are not installed: " + ", ".join(missing)
    return None


def require_lab_host() -> None:
    """Raise a SparkError with the remedy when the lab cannot run on this host."""
    reason = unavailable_reason()
    if reason is None:
        return
    if "root" in reason and "tools" not in reason:
        remedy = "run it as root, e.g. `sudo spark-tui lab up ...`"
    elif "Linux" in reason:
        remedy = "run the lab on a Linux machine or VM; `spark-tui demo` works anywhere"
    else:
        remedy = f"apt-get install -y --no-install-recommends {APT_PACKAGES}"
    raise SparkError(reason, remedy)

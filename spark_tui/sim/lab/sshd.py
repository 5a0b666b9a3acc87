"""OpenSSH for lab nodes: keys, a key-only sshd config, and the client's known_hosts."""

from __future__ import annotations

from pathlib import Path

from spark_tui.core.errors import SparkError
from spark_tui.sim.lab.config import LabConfig, NodeLayout
from spark_tui.sim.lab.preflight import which
from spark_tui.sim.lab.run import run

# The PATH of a session on a lab node: its shims first, then the host's tools.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def generate_key(path: Path, comment: str) -> None:
    """A fresh ed25519 key pair without passphrase at `path` (and `path.pub`)."""
    for p in (path, path.with_name(path.name + ".pub")):
        p.unlink(missing_ok=True)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path])
    path.chmod(0o600)


def public_key(path: Path) -> str:
    """`<type> <base64>` of a key pair's public half (the comment dropped)."""
    fields = path.with_name(path.name + ".pub").read_text().split()
    return f"{fields[0]} {fields[1]}"


def sshd_binary() -> str:
    found = which("sshd")
    if not found:
        raise SparkError("sshd is not installed", "apt-get install -y openssh-server")
    return found


def sshd_config(cfg: LabConfig, node: NodeLayout) -> str:
    """Key-only root login on the node's address; SFTP, TCP and socket forwarding allowed.

    sshd runs in the node's own mount namespace, where the node's dockerd listens on
    /var/run/docker.sock, so forwarding that path reaches this node's engine.
    """
    sftp = which("sftp-server") or "/usr/lib/openssh/sftp-server"
    lines = [
        "# spark-tui lab node " + node.name + " (generated; removed by `spark-tui lab down`)",
        "Port 22",
        f"ListenAddress {node.address}",
        f"HostKey {node.host_key}",
        f"AuthorizedKeysFile {cfg.authorized_keys}",
        f"PidFile {node.sshd_pidfile}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "AllowTcpForwarding yes",
        "AllowStreamLocalForwarding yes",
        "X11Forwarding no",
        "PrintMotd no",
        "MaxSessions 64",
        "MaxStartups 64:30:128",
        "AcceptEnv LANG LC_*",
        f"SetEnv PATH={node.session_bin}:{SYSTEM_PATH} SPARK_LAB_NODE={node.name}",
        f"Subsystem sftp {sftp}",
        "LogLevel INFO",
    ]
    return "\n".join(lines) + "\n"


def known_hosts_text(nodes: list[NodeLayout]) -> str:
    """One known_hosts line per node: its address and its host key (port 22: no brackets)."""
    return "".join(f"{n.address} {public_key(n.host_key)}\n" for n in nodes)

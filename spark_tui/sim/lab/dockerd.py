"""A lab node's own dockerd: started inside the node's namespaces, reached over its socket."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from spark_tui.core.errors import SparkError
from spark_tui.sim.lab.config import NodeLayout
from spark_tui.sim.lab.preflight import which
from spark_tui.sim.lab.sshd import SYSTEM_PATH

# Where sshd and docker inside the node look for the engine (the node's private /run).
NODE_DOCKER_SOCKET = "/var/run/docker.sock"


def dockerd_argv(node: NodeLayout) -> list[str]:
    """dockerd with its own roots and sockets, no iptables and no bridge (hosts' networks
    stay untouched; containers use `--network host`, i.e. the node's namespace)."""
    dockerd = which("dockerd")
    if dockerd is None:
        raise SparkError("dockerd is not installed", "apt-get install -y docker.io")
    return [
        dockerd,
        "--config-file",
        str(node.dir / "daemon.json"),
        "--data-root",
        str(node.data_root),
        "--exec-root",
        str(node.exec_root),
        "-H",
        f"unix://{node.docker_socket}",
        "-H",
        f"unix://{NODE_DOCKER_SOCKET}",
        "--pidfile",
        str(node.dockerd_pidfile),
        "--iptables=false",
        "--ip-forward=false",
        "--ip-masq=false",
        "--bridge=none",
        "--userland-proxy=false",
        "--cgroup-parent",
        node.cgroup_parent,
        # Every container runs through the lab's runc wrapper (see shims.RUNC_WRAPPER).
        "--add-runtime",
        f"lab={runc_wrapper_path(node)}",
        "--default-runtime",
        "lab",
        "--add-runtime",
        f"nvidia={runc_wrapper_path(node)}",
    ]


def runc_wrapper_path(node: NodeLayout) -> Path:
    return node.dockerd_bin / "spark-lab-runc"


def real_runc() -> str:
    runc = which("runc")
    if runc is None:
        raise SparkError("runc is not installed", "apt-get install -y docker.io")
    return runc


def daemon_json(node: NodeLayout, registry_url: str | None = None) -> str:
    """dockerd's config: its identity key in the node's directory, not /etc/docker. With the
    lab's registry (`registry_url`): the names it stands in for (the node's /etc/hosts
    points them at it) are trusted over plain HTTP, and Docker Hub pulls go to it."""
    config: dict[str, Any] = {"deprecated-key-path": str(node.dir / "key.json")}
    if registry_url is not None:
        from spark_tui.sim.lab.registry import STANDS_IN_FOR

        config["insecure-registries"] = [*STANDS_IN_FOR, registry_url.split("://", 1)[1]]
        config["registry-mirrors"] = [registry_url]
    return json.dumps(config) + "\n"


def dockerd_env(node: NodeLayout) -> dict[str, str]:
    """dockerd finds the fake nvidia-container-runtime-hook on its PATH."""
    return {"PATH": f"{node.dockerd_bin}:{SYSTEM_PATH}", "LANG": "C.UTF-8"}


def docker_http(sock: Path | str, method: str, path: str, timeout: float = 5.0) -> tuple[int, Any]:
    """One request to a Docker socket (HTTP/1.0, no SDK): (status, decoded JSON or text)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock))
        s.sendall(f"{method} {path} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    text = body.decode(errors="replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def ping(sock: Path | str, timeout: float = 2.0) -> bool:
    """True when a dockerd answers on this socket."""
    try:
        status, body = docker_http(sock, "GET", "/_ping", timeout)
    except OSError:
        return False
    return status == 200 and body == "OK"


def containers(sock: Path | str) -> list[dict[str, Any]]:
    """Every container (running or not) of the dockerd on this socket."""
    status, body = docker_http(sock, "GET", "/containers/json?all=1")
    return body if status == 200 and isinstance(body, list) else []


def remove_all_containers(sock: Path | str) -> None:
    """Force-remove every container of a lab dockerd (all of them are the lab's)."""
    for c in containers(sock):
        docker_http(sock, "DELETE", f"/containers/{c['Id']}?force=1&v=1", timeout=15)

"""A real container registry for the lab and the tests: Debian's `docker-registry` (the
distribution registry server 2.8), serving the HTTP API v2 without auth.

No public registry is reachable here, so the lab stands one in for ghcr.io and Docker Hub:
its nodes resolve those names to it and trust it over plain HTTP, and spark-tui's
resolution is pointed at it through SPARK_TUI_REGISTRY_ENDPOINTS. `push_blob_image` puts a
small image in it over the API alone (no dockerd), for tests that need tags and digests.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from spark_tui.core.errors import SparkError
from spark_tui.sim.lab.preflight import which

PACKAGE = "docker-registry"
# The registry hosts the lab's registry stands in for (what the nodes resolve to it).
STANDS_IN_FOR = ("ghcr.io", "registry-1.docker.io", "index.docker.io")


def hosts_text(address: str) -> str:
    """A lab node's /etc/hosts: this machine's, plus the registry names the lab's registry
    stands in for (SIMULATED: they never reach the real ghcr.io or Docker Hub)."""
    try:
        base = Path("/etc/hosts").read_text()
    except OSError:
        base = "127.0.0.1 localhost\n"
    names = " ".join(STANDS_IN_FOR)
    return (
        base.rstrip("\n")
        + f"\n# spark-tui lab: its simulated registry stands in for these\n{address} {names}\n"
    )


def registry_binary() -> str:
    found = which("docker-registry") or which("registry")
    if found is None:
        raise SparkError("the registry server is not installed", f"apt-get install -y {PACKAGE}")
    return found


def config_text(root: Path, addr: str) -> str:
    """The registry's config: storage under `root`, listening on `addr` (HOST:PORT)."""
    return json.dumps(
        {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(root)}, "delete": {"enabled": True}},
            "http": {"addr": addr},
        },
        indent=2,
    )


def answers(base_url: str, timeout: float = 1.0) -> bool:
    """True when a registry answers the API's version check at `base_url`."""
    try:
        with urllib.request.urlopen(base_url + "/v2/", timeout=timeout) as res:
            return bool(res.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class LoopbackRegistry:
    """A registry process on a loopback port, for unit tests (a child of this process)."""

    root: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> LoopbackRegistry:
        """Start it (on a free port when `port` is 0) and wait until it answers."""
        import socket
        import time

        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = int(s.getsockname()[1])
        self.root.mkdir(parents=True, exist_ok=True)
        cfg = self.root / "config.yml"
        cfg.write_text(config_text(self.root / "data", f"127.0.0.1:{self.port}"))
        log = open(self.root / "registry.log", "ab")  # noqa: SIM115 - kept open for the child
        self.proc = subprocess.Popen(
            [registry_binary(), "serve", str(cfg)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not answers(self.base_url, 0.5):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.root / "registry.log").read_text(errors="replace")[-500:]
                raise SparkError(f"the registry did not start: {tail}", "see its log")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None


def _request(
    method: str, url: str, body: bytes = b"", ctype: str = ""
) -> tuple[int, dict[str, str]]:
    req = urllib.request.Request(url, data=body if method != "GET" else None, method=method)
    if ctype:
        req.add_header("Content-Type", ctype)
    with urllib.request.urlopen(req, timeout=10) as res:
        return res.status, {k.lower(): v for k, v in res.headers.items()}


def _put_blob(base_url: str, repository: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _status, headers = _request("POST", f"{base_url}/v2/{repository}/blobs/uploads/")
    location = headers["location"]
    if location.startswith("/"):
        location = base_url + location
    sep = "&" if "?" in location else "?"
    _request("PUT", f"{location}{sep}digest={digest}", data, "application/octet-stream")
    return digest


def push_blob_image(base_url: str, repository: str, tags: list[str], marker: str) -> str:
    """Push a one-file image (its content is `marker`, so two markers give two digests)
    under every tag in `tags`; returns its manifest digest."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = marker.encode()
        info = tarfile.TarInfo("marker")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    layer = buf.getvalue()
    layer_digest = _put_blob(base_url, repository, layer)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            "config": {"Labels": {"marker": marker}},
        }
    ).encode()
    config_digest = _put_blob(base_url, repository, config)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "size": len(config),
                "digest": config_digest,
            },
            "layers": [
                {
                    "mediaType": "application/vnd.docker.image.rootfs.diff.tar",
                    "size": len(layer),
                    "digest": layer_digest,
                }
            ],
        }
    ).encode()
    ctype = "application/vnd.docker.distribution.manifest.v2+json"
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    for tag in tags:
        _request("PUT", f"{base_url}/v2/{repository}/manifests/{tag}", manifest, ctype)
    return digest

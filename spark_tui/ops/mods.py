"""Put a rank's mods (and `pre_exec` copies) into its created container, before it starts.

Each copy is packed on the control machine as a tar whose member names are the container
path (parent folders included), and handed to Docker's `put_archive` at `/`, so the
destination's folders need not exist in the image. The Docker SDK does the transfer over
the node's forwarded socket: nothing is staged on the node's disk.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import docker

from spark_tui.core.errors import OperationFailed
from spark_tui.remote.docker_remote import RemoteDocker


def pack(source: str | Path, dest: str) -> bytes:
    """A tar of `source` (a folder or a file) with its members named `dest/...`."""
    src = Path(source)
    if not src.exists():
        raise OperationFailed(
            f"{src} is gone from the control machine since the recipe was read",
            "put the mod folder back, or check the recipe again (`spark-tui check`)",
        )
    target = PurePosixPath(dest)
    if not target.is_absolute() or ".." in target.parts:
        raise OperationFailed(
            f"container path {dest!r} is not an absolute path inside the container",
            "give the copy's `dest:` as an absolute path",
        )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        parts = target.parts[1:]
        # Parent folders first, so the archive makes them where the image has none.
        for i in range(1, len(parts)):
            info = tarfile.TarInfo("/".join(parts[:i]))
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        tar.add(str(src), arcname="/".join(parts), recursive=True)
    return buf.getvalue()


async def put_copies(
    remote: RemoteDocker, container: str, copies: Sequence[tuple[str, str]]
) -> int:
    """Copy every (source, dest) into the created container; returns the bytes sent."""
    sent = 0
    for source, dest in copies:
        data = pack(source, dest)

        def put(c: docker.DockerClient, data: bytes = data) -> bool:
            return bool(c.api.put_archive(container, "/", data))

        ok = await remote.call(put, f"copy {source} into {container}:{dest}")
        if not ok:
            raise OperationFailed(
                f"{remote.node}: Docker refused the copy of {source} into {container}:{dest}",
                "check the node's disk space and that the image has a writable /",
            )
        sent += len(data)
    return sent

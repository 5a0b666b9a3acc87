"""A Docker socket that accepts and never answers: connecting gives up, with a remedy."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from spark_tui.core.errors import OperationFailed
from spark_tui.remote.docker_remote import RemoteDocker


class _SilentForward:
    """A node connection whose forwarded Docker socket is a listener nobody serves."""

    def __init__(self, path: Path) -> None:
        self.name = "spark-a"
        self.path = str(path)

    async def forward_docker_socket(self) -> str:
        return self.path


def test_connect_to_a_silent_engine_times_out(tmp_path: Path) -> None:
    path = tmp_path / "docker.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)  # connections are accepted by the kernel; nothing ever reads them
    try:
        started = time.monotonic()
        with pytest.raises(OperationFailed) as caught:
            asyncio.run(RemoteDocker.open(_SilentForward(path), timeout=0.5))  # type: ignore[arg-type]
        # Without a timeout on the version question the thread waited for ever (and the
        # interpreter's exit, which joins it, with it).
        assert time.monotonic() - started < 30
        assert "does not answer" in str(caught.value)
        assert caught.value.remedy
    finally:
        listener.close()

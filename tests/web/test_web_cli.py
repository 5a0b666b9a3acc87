"""`spark-tui demo --web`'s flags: what it refuses (exit 2, with a remedy, before anything
listens or starts)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def spark_tui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_tui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--web", "--host", "0.0.0.0"], "--expose-demo-to-network"),
        (["--web", "--host", "192.0.2.1"], "--expose-demo-to-network"),
        (["--web", "--token", "short"], "--token"),
        (["--web", "--port", "70000"], "--port"),
        (["--web", "--max-visitors", "0"], "--max-visitors"),
        (["--host", "127.0.0.1"], "add --web"),
        (["--token", "a-long-enough-token"], "add --web"),
    ],
)
def test_refused_with_a_remedy(args: list[str], says: str) -> None:
    result = spark_tui("demo", *args)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and "remedy:" in result.stderr
    assert "Traceback" not in result.stderr
    assert "open http" not in result.stdout  # nothing was served


def test_a_port_in_use_is_an_input_error() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = spark_tui("demo", "--web", "--port", str(port))
    assert result.returncode == 2, result.stderr
    assert f"port {port}" in result.stderr and "remedy: pick another --port" in result.stderr

"""Against a real OpenSSH sshd on a loopback address (skipped where sshd or root is missing):
its MaxSessions limit, quoting through its shell, and a probe of this very machine."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from spark_tui.core.errors import UnreachableError
from spark_tui.core.inventory import InventoryNode
from spark_tui.remote.probe import probe_nodes
from spark_tui.remote.ssh import NodeConnection

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
ADDRESS = "127.0.0.71"

NEEDS = "needs OpenSSH's sshd and root (it runs commands as the logged-in user)"
HERE = os.path.exists(SSHD) and hasattr(os, "geteuid") and os.geteuid() == 0
if not HERE and os.environ.get("CI", "").lower() == "true":
    raise RuntimeError(f"CI must run the real-sshd tests, but this machine {NEEDS[:-1]})")
pytestmark = pytest.mark.skipif(not HERE, reason=NEEDS)


def not_here(reason: str) -> None:
    """Skip with the reason on a developer's machine; under CI=true fail with it."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((ADDRESS, 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def sshd(tmp_path: Path) -> AsyncIterator[InventoryNode]:
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(tmp_path / "host_key"))
    os.chmod(tmp_path / "host_key", 0o600)
    client = asyncssh.generate_private_key("ssh-ed25519")
    client.write_private_key(str(tmp_path / "id"))
    os.chmod(tmp_path / "id", 0o600)
    (tmp_path / "authorized_keys").write_text(client.export_public_key().decode())
    port = free_port()
    pub = host_key.export_public_key().decode().split()
    (tmp_path / "known_hosts").write_text(f"[{ADDRESS}]:{port} {pub[0]} {pub[1]}\n")
    config = tmp_path / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress {ADDRESS}\nHostKey {tmp_path / 'host_key'}\n"
        f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}\nPidFile {tmp_path / 'pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
    )
    os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
    proc = await asyncio.create_subprocess_exec(
        SSHD,
        "-D",
        "-e",
        "-f",
        str(config),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        for _ in range(100):
            try:
                _r, w = await asyncio.open_connection(ADDRESS, port)
                w.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        else:
            said = ""
            if proc.stderr is not None and proc.returncode is not None:  # it exited: why
                said = (await proc.stderr.read()).decode(errors="replace")
            not_here(f"sshd did not start on {ADDRESS}:{port}: {said.strip()[-800:]}")
        yield InventoryNode(
            name="real",
            host=ADDRESS,
            port=port,
            user="root",
            identity_file=str(tmp_path / "id"),
            known_hosts=str(tmp_path / "known_hosts"),
        )
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


async def test_max_sessions_respected(sshd: InventoryNode) -> None:
    conn = NodeConnection(sshd, ssh_config=None)
    await conn.connect()
    try:
        results = await asyncio.gather(*(conn.run(f"sleep 0.2; echo {i}") for i in range(14)))
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(14)]
    finally:
        await conn.close()
    # Past OpenSSH's MaxSessions (10) the node refuses sessions: a clear error, no hang.
    greedy = NodeConnection(sshd, ssh_config=None, max_sessions=14)
    await greedy.connect()
    try:
        outcome = await asyncio.gather(
            *(greedy.run("sleep 0.3") for _ in range(14)), return_exceptions=True
        )
        refused = [o for o in outcome if isinstance(o, UnreachableError)]
        assert refused and "refused to run" in refused[0].message
    finally:
        await greedy.close()


async def test_quoting_through_a_real_shell(sshd: InventoryNode) -> None:
    conn = NodeConnection(sshd, ssh_config=None)
    await conn.connect()
    try:
        hostile = "$(touch /tmp/spark-tui-pwned); `id`; 'quote\" \\ back"
        res = await conn.run_argv(["printf", "%s", hostile])
        assert res.stdout == hostile
        assert not os.path.exists("/tmp/spark-tui-pwned")
    finally:
        await conn.close()


async def test_probe_this_machine(sshd: InventoryNode) -> None:
    (facts,) = await probe_nodes([sshd], ssh_config=None)
    meminfo = Path("/proc/meminfo").read_text()
    total_kb = int(next(ln.split()[1] for ln in meminfo.splitlines() if ln.startswith("MemTotal:")))
    assert facts.memory_total_bytes == total_kb * 1024
    assert facts.hostname == socket.gethostname()
    assert facts.home == "/root"
    if shutil.which("nvidia-smi") is None:
        # No GPU here: said plainly instead of invented.
        assert facts.gpu_name is None
        assert any("nvidia-smi not found" in e for e in facts.errors)

"""SSH connections: host keys, parallel pool, unreachable nodes, reconnect, forwards, config."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from mini_sshd import MiniServer

from spark_tui.core.errors import EXIT_UNREACHABLE, UnreachableError
from spark_tui.core.inventory import InventoryNode
from spark_tui.remote.hostkeys import HostKeyError
from spark_tui.remote.ssh import CommandTimeout, ConnectionPool, NodeConnection, Outage

FAST = {"ssh_config": None, "connect_timeout": 3.0, "backoff_initial": 0.05}


def known(tmp_path: Path, *servers: MiniServer) -> Path:
    path = tmp_path / "known_hosts"
    path.write_text("".join(s.known_hosts_line() for s in servers))
    return path


async def test_known_keys_pool_runs_commands_quoted(
    tmp_path: Path, servers: list[MiniServer]
) -> None:
    kh = known(tmp_path, *servers)
    pool = ConnectionPool([s.node(f"n{i}", kh) for i, s in enumerate(servers)], **FAST)
    async with pool:
        a, b = pool.connections
        res = await a.run("echo hello")
        assert (res.stdout, res.exit_status, res.ok) == ("hello\n", 0, True)
        # A hostile value stays one literal argument: nothing after `;` runs.
        hostile = "x; echo pwned $(id) `id`"
        res = await b.run_argv(["printf", "%s|", hostile, "$HOME"])
        assert res.stdout == f"{hostile}|$HOME|"
        res = await a.run("exit 7")
        assert res.exit_status == 7 and not res.ok


async def test_unknown_key_refused_without_yes(tmp_path: Path, servers: list[MiniServer]) -> None:
    kh = tmp_path / "known_hosts"
    conn = NodeConnection(servers[0].node("spark-a", kh), **FAST)
    with pytest.raises(HostKeyError) as err:
        await conn.connect()
    assert servers[0].fingerprint() in err.value.message
    assert "--accept-new-host-keys" in err.value.remedy
    assert err.value.exit_code == EXIT_UNREACHABLE
    assert not kh.exists()  # nothing trusted, nothing written


async def test_unknown_key_confirmed_by_callback(tmp_path: Path, servers: list[MiniServer]) -> None:
    kh = tmp_path / "sub" / "known_hosts"
    asked: list[tuple[str, str]] = []

    async def confirm(host: str, fp: str) -> bool:
        asked.append((host, fp))
        return True

    s = servers[0]
    conn = NodeConnection(s.node("spark-a", kh), confirm=confirm, **FAST)
    await conn.connect()
    assert asked == [(f"[{s.host}]:{s.port}", s.fingerprint())]
    assert kh.read_text().startswith(f"[{s.host}]:{s.port} ssh-ed25519 ")
    await conn.close()
    # The key is on record now: no question the second time.
    again = NodeConnection(s.node("spark-a", kh), confirm=confirm, **FAST)
    await again.connect()
    assert len(asked) == 1
    await again.close()


async def test_unknown_key_declined(tmp_path: Path, servers: list[MiniServer]) -> None:
    async def no(host: str, fp: str) -> bool:
        return False

    kh = tmp_path / "known_hosts"
    conn = NodeConnection(servers[0].node("spark-a", kh), confirm=no, **FAST)
    with pytest.raises(HostKeyError):
        await conn.connect()
    assert not kh.exists()


async def test_accept_new_host_keys_flag(tmp_path: Path, servers: list[MiniServer]) -> None:
    kh = tmp_path / "known_hosts"
    pool = ConnectionPool(
        [s.node(f"n{i}", kh) for i, s in enumerate(servers)], accept_new_host_keys=True, **FAST
    )
    async with pool:
        assert all(c.connected for c in pool)
    assert len(kh.read_text().splitlines()) == 2


async def test_changed_key_refused_with_remedy(tmp_path: Path, servers: list[MiniServer]) -> None:
    s = servers[0]
    kh = known(tmp_path, s)
    before = kh.read_text()
    old_fp = s.fingerprint()
    await s.stop()
    s.host_key = __import__("asyncssh").generate_private_key("ssh-ed25519")
    await s.start()
    asked: list[str] = []

    async def confirm(host: str, fp: str) -> bool:
        asked.append(fp)
        return True

    conn = NodeConnection(s.node("spark-a", kh), confirm=confirm, accept_new_host_keys=True, **FAST)
    with pytest.raises(HostKeyError) as err:
        await conn.connect()
    assert "CHANGED" in err.value.message
    assert old_fp in err.value.message and s.fingerprint() in err.value.message
    assert f"ssh-keygen -R '[{s.host}]:{s.port}'" in err.value.remedy
    assert asked == []  # a changed key is never offered for a yes
    assert kh.read_text() == before  # the old key stays; nothing is replaced or added


async def test_one_node_down_others_carry_on(tmp_path: Path, servers: list[MiniServer]) -> None:
    kh = known(tmp_path, *servers)
    await servers[1].stop()
    nodes = [s.node(f"spark-{c}", kh) for c, s in zip("ab", servers, strict=True)]
    pool = ConnectionPool(nodes, **FAST)
    errors = await pool.open(partial=True)
    try:
        assert list(errors) == ["spark-b"]
        assert "connection refused" in errors["spark-b"].message
        assert "sshd" in errors["spark-b"].remedy
        assert [c.name for c in pool.reachable] == ["spark-a"]
        assert (await pool["spark-a"].run("echo up")).stdout == "up\n"
    finally:
        await pool.close()
    with pytest.raises(UnreachableError) as err:
        await ConnectionPool(nodes, **FAST).open()
    assert err.value.message.startswith("spark-b (")
    assert err.value.exit_code == EXIT_UNREACHABLE


async def test_silent_node_times_out(tmp_path: Path) -> None:
    # A TCP port that accepts but never speaks SSH.
    sock = socket.socket()
    sock.bind(("127.0.0.63", 0))
    sock.listen(1)
    try:
        node = InventoryNode(
            name="mute",
            host="127.0.0.63",
            port=sock.getsockname()[1],
            known_hosts=str(tmp_path / "kh"),
        )
        conn = NodeConnection(node, ssh_config=None, connect_timeout=0.5)
        with pytest.raises(UnreachableError) as err:
            await conn.connect()
        assert "no answer within 0.5 s" in err.value.message
    finally:
        sock.close()


async def test_command_timeout(tmp_path: Path, servers: list[MiniServer]) -> None:
    conn = NodeConnection(servers[0].node("a", known(tmp_path, servers[0])), **FAST)
    await conn.connect()
    try:
        with pytest.raises(CommandTimeout) as err:
            await conn.run("sleep 5", timeout=0.3)
        assert "did not finish within 0.3 s" in err.value.message
        assert (await conn.run("echo still")).stdout == "still\n"
    finally:
        await conn.close()


async def test_reconnect_restores_port_forward(tmp_path: Path, servers: list[MiniServer]) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    target = await asyncio.start_server(echo, "127.0.0.1", 0)
    tport = target.sockets[0].getsockname()[1]
    conn = NodeConnection(servers[0].node("a", known(tmp_path, servers[0])), **FAST)
    await conn.connect()

    async def roundtrip(port: int, text: str) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(text.encode() + b"\n")
        await writer.drain()
        data = await reader.readline()
        writer.close()
        return data

    try:
        port = await conn.forward_local_port("127.0.0.1", tport)
        assert await roundtrip(port, "one") == b"one\n"
        servers[0].drop_connections()
        await asyncio.sleep(0.1)
        assert not conn.connected
        assert (await conn.run("echo back")).stdout == "back\n"  # reconnects on its own
        assert conn.reconnects == 1
        assert await roundtrip(port, "two") == b"two\n"  # same local port, new connection
    finally:
        await conn.close()
        target.close()


async def test_reconnect_gives_up_with_reason(tmp_path: Path, servers: list[MiniServer]) -> None:
    conn = NodeConnection(
        servers[0].node("a", known(tmp_path, servers[0])), reconnect_attempts=2, **FAST
    )
    await conn.connect()
    await servers[0].stop()
    await asyncio.sleep(0.1)
    with pytest.raises(UnreachableError) as err:
        await conn.run("echo x")
    assert "after 2 attempts" in err.value.message
    await conn.close()


async def test_ssh_config_alias_and_proxyjump(
    tmp_path: Path, servers: list[MiniServer], client_key: tuple[Path, object]
) -> None:
    a, b = servers
    kh = tmp_path / "kh"
    kh.write_text(a.known_hosts_line())  # the jump host is known, the target is not
    cfg = tmp_path / "config"
    cfg.write_text(
        f"Host jump\n  HostName {a.host}\n  Port {a.port}\n  IdentityFile {client_key[0]}\n"
        f"  UserKnownHostsFile {kh}\n"
        f"Host target\n  HostName {b.host}\n  Port {b.port}\n  IdentityFile {client_key[0]}\n"
        f"  UserKnownHostsFile {kh}\n  ProxyJump jump\n"
    )
    asked: list[str] = []

    async def confirm(host: str, fp: str) -> bool:
        asked.append(host)
        return True

    conn = NodeConnection(
        InventoryNode(name="t", host="target"), ssh_config=[str(cfg)], confirm=confirm
    )
    await conn.connect()
    try:
        assert (conn.address, conn.port) == (b.host, b.port)
        assert (await conn.run("echo via-jump")).stdout == "via-jump\n"
        assert asked == [f"[{b.host}]:{b.port}"]
        # The target's session came through the jump host, not straight from us.
        assert len(a.conns) == 1
        assert a.forwarded == [(b.host, b.port)] * 2  # refused key, then accepted
    finally:
        await conn.close()


async def test_reconnect_patiently_waits_out_an_outage_longer_than_the_budget(
    tmp_path: Path, servers: list[MiniServer]
) -> None:
    """A watch must outlast any outage: past the bounded budget (2 attempts here) it keeps
    trying with capped backoff, reports every attempt, and is back once the node is."""
    conn = NodeConnection(
        servers[0].node("a", known(tmp_path, servers[0])),
        reconnect_attempts=2,
        **{**FAST, "backoff_max": 0.2},
    )
    await conn.connect()
    try:
        await servers[0].stop()
        await asyncio.sleep(0.1)
        reports: list[Outage] = []
        task = asyncio.create_task(conn.reconnect_patiently(reports.append))
        while len(reports) < 6:
            assert not task.done(), task
            await asyncio.sleep(0.05)
        assert conn.outage is not None and conn.outage.attempts >= 6
        await servers[0].start()
        outage = await asyncio.wait_for(task, 10)
        assert outage is not None and outage.ended is not None
        assert outage.attempts >= 6 and outage.reason and outage.remedy
        assert max(r.retry_in for r in reports) <= 0.2, "the backoff is capped"
        assert conn.outage is None
        assert (await conn.run("echo back")).stdout == "back\n"
    finally:
        await conn.close()


def test_forward_dirs_of_processes_that_are_gone_are_swept(tmp_path: Path) -> None:
    """A process killed with SIGKILL cannot clean up: the next one removes its socket
    folder (named with its pid), and nothing else."""
    import os
    import subprocess
    import sys

    from spark_tui.remote.ssh import sweep_forward_dirs

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = tmp_path / f"spark-tui-{int(gone.stdout)}-x1"
    mine = tmp_path / f"spark-tui-{os.getpid()}-x2"
    other = tmp_path / "spark-tui-demo-x3"
    for d in (dead, mine, other):
        d.mkdir()
        (d / "docker-a.sock").touch()
    assert sweep_forward_dirs(str(tmp_path)) == [str(dead)]
    assert not dead.exists() and mine.exists() and other.exists()


def test_the_folder_of_a_killed_process_not_yet_reaped_is_swept(tmp_path: Path) -> None:
    """A process killed with SIGKILL whose parent has not reaped it (a zombie) still
    answers kill(pid, 0); it holds no socket any more, so its folder goes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from spark_tui.remote.ssh import sweep_forward_dirs

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(child.pid, signal.SIGKILL)
        stat = Path(f"/proc/{child.pid}/stat")
        deadline = time.monotonic() + 10
        while stat.read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not become a zombie"
            time.sleep(0.05)
        folder = tmp_path / f"spark-tui-{child.pid}-z1"
        folder.mkdir()
        assert sweep_forward_dirs(str(tmp_path)) == [str(folder)]
    finally:
        child.wait()


async def test_opening_a_pool_sweeps_folders_left_by_killed_processes(
    tmp_path: Path, servers: list[MiniServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cockpit may attach (over SSH commands) long before it forwards a Docker socket:
    the folders of a killed spark-tui are swept when the pool opens, not at the first
    forward."""
    import subprocess
    import sys
    import tempfile

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    base = tmp_path / "tmp"
    base.mkdir()
    dead = base / f"spark-tui-{int(gone.stdout)}-p1"
    dead.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    kh = known(tmp_path, *servers)
    pool = ConnectionPool([s.node(f"n{i}", kh) for i, s in enumerate(servers)], **FAST)
    async with pool:
        assert not dead.exists()


async def test_a_command_the_client_gave_up_on_is_reaped_by_the_server(
    tmp_path: Path, servers: list[MiniServer]
) -> None:
    # The test server's side of a timed-out command (still running, as under a real sshd):
    # its stop kills and reaps the shell while the loop runs, so no subprocess transport is
    # left for the garbage collector of a later test ("Event loop is closed").
    conn = NodeConnection(servers[0].node("a", known(tmp_path, servers[0])), **FAST)
    await conn.connect()
    try:
        with pytest.raises(CommandTimeout):
            await conn.run("sleep 5", timeout=0.3)
    finally:
        await conn.close()
    await servers[0].stop()
    (shell,) = servers[0].procs
    assert shell.returncode == -9  # killed by the stop, not waited out

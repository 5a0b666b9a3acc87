"""Simulated nodes stop while a client is still connected (Python 3.12+'s
`Server.wait_closed` waits for every accepted connection to end), and leave nothing behind
for the garbage collector to close after their loop is gone: no command, no task."""

from __future__ import annotations

import asyncio
import gc
import signal
import time

import asyncssh
import pytest

from spark_tui.sim.nodes import SimCluster
from spark_tui.sim.nodes.loop_thread import LoopThread


@pytest.mark.parametrize("own_loop", [False, True])
async def test_nodes_stop_while_a_client_is_connected(sim_scenario, own_loop: bool) -> None:
    sim = SimCluster(sim_scenario(1), own_loop=own_loop)
    await sim.start()
    node = sim.nodes[0]
    conn = await asyncssh.connect(
        node.address,
        node.port,
        username=node.user,
        client_keys=[str(sim.identity_file)],
        known_hosts=str(sim.known_hosts_path),
        config=None,
    )
    try:
        assert (await conn.run("hostname", check=True)).stdout == f"{node.hostname}\n"
        await asyncio.wait_for(sim.close(), 30)
        # The node hung up on the client too.
        await asyncio.wait_for(conn.wait_closed(), 10)
    finally:
        conn.abort()


def unfinished_subprocesses() -> list[asyncio.SubprocessTransport]:
    """Subprocess transports not closed yet: one left behind is closed by the garbage
    collector, on a loop that may be gone by then ("Event loop is closed")."""
    return [
        o
        for o in gc.get_objects()
        if isinstance(o, asyncio.SubprocessTransport) and not o.is_closing()
    ]


async def test_a_node_closed_during_a_command_has_waited_for_it(sim_scenario) -> None:
    async with SimCluster(sim_scenario(1)) as sim:
        node = sim.nodes[0]
        conn = await asyncssh.connect(
            node.address,
            node.port,
            username=node.user,
            client_keys=[str(sim.identity_file)],
            known_hosts=str(sim.known_hosts_path),
            config=None,
        )
        try:
            before = {id(t) for t in unfinished_subprocesses()}
            process = await conn.create_process("echo started; exec sleep 47")
            assert await asyncio.wait_for(process.stdout.readline(), 30) == "started\n"
            started = time.monotonic()
            await asyncio.wait_for(node.close(), 60)
            took = time.monotonic() - started
            # At once, with no loop iteration in between: the node waited for its command.
            left = [t for t in unfinished_subprocesses() if id(t) not in before]
            assert not left, (f"the close returned after {took:.1f} s", left)
        finally:
            conn.abort()


def test_tasks_left_on_the_nodes_loop_end_before_it_closes() -> None:
    """A task still on the nodes' own loop when it stops (an SSH session's handler) is
    cancelled and runs its cleanup while the loop can still run it, as asyncio.run does."""
    thread = LoopThread("test-loop")
    cleaned: list[str] = []

    async def lingering() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0)  # its cleanup needs the loop: closed, it would fail
            cleaned.append("cleaned up")

    async def leave_it() -> None:
        asyncio.get_running_loop().create_task(lingering())
        await asyncio.sleep(0.01)

    async def main() -> None:
        await thread.run(leave_it())
        await thread.stop()

    asyncio.run(main())
    assert cleaned == ["cleaned up"]


async def test_a_node_closed_after_its_command_exited_waits_for_its_pipes(sim_scenario) -> None:
    """A command that exited while a process it left holds its output open: the node's end
    kills that one too and waits until the command's pipes are closed, not only its exit."""
    async with SimCluster(sim_scenario(1)) as sim:
        node = sim.nodes[0]
        before = {id(t) for t in unfinished_subprocesses()}
        child = await node.commands.start(
            "sleep 47 & echo started",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert child.stdout is not None
        assert await asyncio.wait_for(child.stdout.readline(), 30) == b"started\n"
        while child.returncode is None:  # its exit seen; `sleep` still holds the pipes
            await asyncio.sleep(0.01)
        await asyncio.wait_for(node.close(), 30)
        left = [t for t in unfinished_subprocesses() if id(t) not in before]
        assert not left, left


async def test_a_node_closed_after_its_command_lost_stdin_kills_and_waits_for_it(
    sim_scenario,
) -> None:
    """A command whose stdin was closed (the SSH client sent EOF) still runs: the node's end
    kills it and waits for it, though asyncio reports the stdin pipe's end as a lost
    connection."""
    async with SimCluster(sim_scenario(1)) as sim:
        node = sim.nodes[0]
        before = {id(t) for t in unfinished_subprocesses()}
        child = await node.commands.start(
            "echo started; exec sleep 47",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert child.stdin is not None and child.stdout is not None
        assert await asyncio.wait_for(child.stdout.readline(), 30) == b"started\n"
        child.stdin.close()
        await asyncio.wait_for(child.stdin.wait_closed(), 10)
        await asyncio.wait_for(node.close(), 30)
        assert child.returncode == -signal.SIGKILL, child.returncode
        left = [t for t in unfinished_subprocesses() if id(t) not in before]
        assert not left, left


async def test_a_container_being_started_as_the_node_closes_is_killed_and_waited_for(
    sim_scenario,
) -> None:
    """A start request under way when the node begins to close (a CLI interrupted during its
    launch): its process is killed and reaped before the node's end returns, not left
    running with a transport the garbage collector closes after the loop is gone."""
    from spark_tui.sim.nodes.images import bundled_image_refs

    async with SimCluster(sim_scenario(1)) as sim:
        node = sim.nodes[0]
        before = {id(t) for t in unfinished_subprocesses()}
        body = {"Image": bundled_image_refs()[0], "Entrypoint": ["sh", "-c", "exec sleep 47"]}
        container = node.engine.create(body, None)
        start = asyncio.create_task(node.engine.start(container))
        await asyncio.sleep(0)  # the start is under way: its process is being created
        await asyncio.wait_for(node.close(), 60)
        await asyncio.wait_for(start, 10)
        assert not container.running and container.exit_code == 137, container.status
        left = [t for t in unfinished_subprocesses() if id(t) not in before]
        assert not left, left

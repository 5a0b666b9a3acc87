"""A probe answered by a simulated node and given up half-way (its connection closed, the
demo quit) leaves no command of it running on this machine."""

from __future__ import annotations

import asyncio
import gc
import os
import time
from pathlib import Path

import pytest

from spark_tui.remote import probe_commands as pc
from spark_tui.sim.nodes import SimCluster


def running_children() -> dict[int, str]:
    """This process's children that still run (not zombies), with their commands."""
    me, found = os.getpid(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found[int(entry.name)] = command
    return found


async def started(command: str, probe: asyncio.Future[str]) -> None:
    """Wait until `command` runs as this process's child (the probe still going)."""
    deadline = time.monotonic() + 30
    while not any(command in c for c in running_children().values()):
        assert time.monotonic() < deadline, "the slow section never started"
        assert not probe.done(), probe
        await asyncio.sleep(0.05)


async def test_a_probe_given_up_kills_the_commands_it_ran(
    sim_scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A section that runs for real and takes long (as the Hugging Face scan of a big cache
    # can): the probe is given up while it runs.
    slow = "sleep 47; echo done"
    monkeypatch.setitem(pc.SECTIONS, "hf_cache", slow)
    async with SimCluster(sim_scenario(1)) as sim:
        node = sim.nodes[0]
        before = set(running_children())
        probe = asyncio.ensure_future(node.answer_probe())
        await started(slow, probe)
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe
        deadline = time.monotonic() + 10
        while left := {p: c for p, c in running_children().items() if p not in before}:
            assert time.monotonic() < deadline, f"left running: {left}"
            await asyncio.sleep(0.05)


def _unfinished_subprocesses() -> list[asyncio.SubprocessTransport]:
    """Subprocess transports whose process has not been seen to exit: left behind, each is
    closed by the garbage collector, after the loop is gone ("Event loop is closed")."""
    return [
        o
        for o in gc.get_objects()
        if isinstance(o, asyncio.SubprocessTransport) and o.get_returncode() is None
    ]


async def test_a_probe_given_up_has_waited_for_the_commands_it_killed(
    sim_scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = "sleep 47; echo done"
    monkeypatch.setitem(pc.SECTIONS, "hf_cache", slow)
    async with SimCluster(sim_scenario(1)) as sim:
        before = {id(t) for t in _unfinished_subprocesses()}
        probe = asyncio.ensure_future(sim.nodes[0].answer_probe())
        await started(slow, probe)
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe
        # At once, with no loop iteration in between: the probe itself waited for them.
        left = [t for t in _unfinished_subprocesses() if id(t) not in before]
        assert not left, left

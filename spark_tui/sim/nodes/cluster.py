"""`SimCluster`: start N simulated Sparks, write their inventory and known_hosts, stop them."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import os
import sys
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from spark_tui.core.inventory import InventoryNode, inventory_to_yaml
from spark_tui.sim.nodes.addresses import free_base_address
from spark_tui.sim.nodes.gb10 import primary_netdev
from spark_tui.sim.nodes.images import bundled_image_refs
from spark_tui.sim.nodes.loop_thread import LoopThread
from spark_tui.sim.nodes.node import (
    SimNode,
    load_or_create_key,
    remove_tree,
    socket_dir_for,
    write_vllm_shim,
)
from spark_tui.sim.nodes.scenario import Scenario, random_loopback_base

T = TypeVar("T")
# How many free-looking address ranges to try when another process takes one first.
_ADDRESS_RACES = 5


class SimCluster:
    """N simulated Sparks (all simulated), usable as an async context manager.

    `async with SimCluster(Scenario(nodes=2)) as cluster:` starts every node, then
    `cluster.inventory_path` names an inventory YAML (host, port, user, identity_file,
    known_hosts per node) that every spark-tui command accepts, and `cluster.nodes` holds
    the `SimNode`s. Leaving the block stops the SSH servers and Docker APIs and kills every
    container's process group. Without `state_dir` the files live in a temp dir that is
    removed at the end; `inventory_path` may put the inventory elsewhere.

    `free_addresses`: the nodes take the first free loopback range from the scenario's
    `base_address` on (then random ranges): nothing listens there, and the SSH port (when
    fixed) and the engines' ports (`addresses.ENGINE_PORTS`) bind. `scenario` is then the
    one that started. `own_loop`: the nodes run on an event loop of their own in a thread
    (see `loop_thread`: needed beside a Textual app); their coroutines must then be run
    with `await cluster.call(coro)`.
    """

    def __init__(
        self,
        scenario: Scenario | None = None,
        *,
        state_dir: str | Path | None = None,
        inventory_path: str | Path | None = None,
        image_refs: list[str] | None = None,
        free_addresses: bool = False,
        own_loop: bool = False,
    ) -> None:
        self.scenario = scenario or Scenario()
        self.free_addresses = free_addresses
        self.own_loop = own_loop
        self._loop_thread: LoopThread | None = None
        self._given_state_dir = Path(state_dir) if state_dir is not None else None
        self._given_inventory = Path(inventory_path) if inventory_path is not None else None
        self._image_refs = image_refs
        self.state_dir = Path()
        self.nodes: list[SimNode] = []
        self.inventory: list[InventoryNode] = []
        self.inventory_path = Path()
        self.known_hosts_path = Path()
        self.identity_file = Path()
        self._temp_dirs: list[Path] = []
        self._started = False

    async def __aenter__(self) -> SimCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def node(self, name: str) -> SimNode:
        """A node by name (e.g. "sim-spark-1")."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the loop the nodes run on (their own, or the caller's)."""
        if self._loop_thread is None:
            return await coro
        return await self._loop_thread.run(coro)

    async def start(self) -> None:
        """Start every node (on their own loop when `own_loop`); write inventory files."""
        if self.own_loop:
            self._loop_thread = LoopThread("simulated-sparks")
            try:
                await self._loop_thread.run(self._start())
            except BaseException:
                await self._stop_loop()
                raise
        else:
            await self._start()

    async def _start(self) -> None:
        if self._given_state_dir is not None:
            self.state_dir = self._given_state_dir
            self.state_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.state_dir = Path(tempfile.mkdtemp(prefix="spark-tui-sim-"))
            self._temp_dirs.append(self.state_dir)
        socket_dir, temporary = socket_dir_for(self.state_dir)
        if temporary:
            self._temp_dirs.append(socket_dir)
        self.identity_file = self.state_dir / "id_ed25519"
        client_key = load_or_create_key(self.identity_file)
        shim_dir = write_vllm_shim(self.state_dir / "bin", sys.executable)
        refs = self._image_refs if self._image_refs is not None else bundled_image_refs()
        self._started = True
        try:
            if not self.free_addresses:
                await self._start_nodes(client_key, shim_dir, socket_dir, refs)
            else:
                await self._start_on_free_addresses(client_key, shim_dir, socket_dir, refs)
        except BaseException:
            await self._close()
            raise
        self._write_files()

    async def _start_on_free_addresses(self, *args: Any) -> None:
        first = self.scenario.base_address
        for attempt in range(_ADDRESS_RACES):
            base = free_base_address(self.scenario.nodes, self.scenario.ssh_port, first)
            self.scenario = dataclasses.replace(self.scenario, base_address=base)
            try:
                await self._start_nodes(*args)
                return
            except OSError as exc:
                # Another process bound one of these addresses since the probe: next range.
                if exc.errno != errno.EADDRINUSE or attempt == _ADDRESS_RACES - 1:
                    raise
                await self._close_nodes()
                first = random_loopback_base(self.scenario.nodes)

    async def _start_nodes(
        self, client_key: Any, shim_dir: Path, socket_dir: Path, refs: list[str]
    ) -> None:
        peers = self.scenario.all_nodes()
        self.nodes = [
            SimNode(
                s,
                peers,
                self.state_dir / "nodes" / s.name,
                user=self.scenario.user,
                client_key=client_key,
                ssh_port=self.scenario.ssh_port,
                image_refs=refs,
                shim_dir=shim_dir,
                socket_dir=socket_dir,
                pace=self.scenario.pace,
                token_scale=self.scenario.token_scale,
            )
            for s in peers
        ]
        for n in self.nodes:
            n.cluster_nodes = self.nodes
        await asyncio.gather(*(n.start() for n in self.nodes))

    def _write_files(self) -> None:
        self.known_hosts_path = self.state_dir / "known_hosts"
        self.known_hosts_path.write_text(self.known_hosts())
        self.inventory = [
            InventoryNode(
                name=n.name,
                host=n.address,
                port=n.port,
                user=n.user,
                identity_file=str(self.identity_file),
                known_hosts=str(self.known_hosts_path),
            )
            for n in self.nodes
        ]
        self.inventory_path = self._given_inventory or self.state_dir / "inventory.yaml"
        self.inventory_path.parent.mkdir(parents=True, exist_ok=True)
        # Whole or not at all: a script waiting for the file never reads half of it.
        partial = self.inventory_path.with_name(f".{self.inventory_path.name}.partial")
        partial.write_text(
            "# Simulated DGX Sparks (spark-tui sim): loopback SSH servers, no GPU.\n"
            + inventory_to_yaml(self.inventory)
        )
        os.replace(partial, self.inventory_path)

    def known_hosts(self) -> str:
        """One known_hosts line per node (`[addr]:port` unless the port is 22)."""
        lines = []
        for n in self.nodes:
            host = n.address if n.port == 22 else f"[{n.address}]:{n.port}"
            key = n.host_key.export_public_key().decode().split()
            lines.append(f"{host} {key[0]} {key[1]}\n")
        return "".join(lines)

    async def close(self) -> None:
        """Stop every node and kill every container process; remove temp dirs."""
        if self._loop_thread is None:
            await self._close()
            return
        try:
            if self._loop_thread.running:
                await self._loop_thread.run(self._close())
        finally:
            await self._stop_loop()

    async def _stop_loop(self) -> None:
        if self._loop_thread is not None:
            await self._loop_thread.stop()
            self._loop_thread = None

    async def _close_nodes(self) -> None:
        await asyncio.gather(*(n.close() for n in self.nodes), return_exceptions=True)

    async def _close(self) -> None:
        if not self._started:
            return
        self._started = False
        await self._close_nodes()
        for path in self._temp_dirs:
            remove_tree(path)
        self._temp_dirs.clear()

    def describe(self) -> str:
        """What is running and how to use it, for a person."""
        lines = [f"Simulated DGX Sparks ({len(self.nodes)} nodes, simulated: no GPU, no Docker):"]
        for n in self.nodes:
            lines.append(
                f"  {n.name:<14} ssh {n.user}@{n.address} -p {n.port}   "
                f"{n.scenario.memory_gb} GB, ConnectX {primary_netdev(n.scenario)}, "
                f"docker {n.docker_socket}"
            )
            if n.page_cache_bytes:
                gib = n.page_cache_bytes / 2**30
                lines.append(f"  {'':<14} page cache holding {gib:.1f} GiB")
            if n.scenario.dies_after_ready is not None:
                lines.append(
                    f"  {'':<14} its engine dies {n.scenario.dies_after_ready:g} s after ready"
                )
        lines += [
            f"Inventory:   {self.inventory_path}",
            f"Identity:    {self.identity_file}",
            f"known_hosts: {self.known_hosts_path}",
            "Try:",
            f"  spark-tui probe --inventory {self.inventory_path}",
            f"  spark-tui check glm-5.3-flash --inventory {self.inventory_path}",
            f"  ssh -i {self.identity_file} -o UserKnownHostsFile={self.known_hosts_path} "
            f"-p {self.nodes[0].port} {self.nodes[0].user}@{self.nodes[0].address} nvidia-smi",
        ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A machine-readable summary (what `describe` says)."""
        return {
            "inventory": str(self.inventory_path),
            "identity_file": str(self.identity_file),
            "known_hosts": str(self.known_hosts_path),
            "nodes": [
                {
                    "name": n.name,
                    "address": n.address,
                    "port": n.port,
                    "user": n.user,
                    "memory_gb": n.scenario.memory_gb,
                    "docker_socket": str(n.docker_socket),
                    "home": str(n.home),
                }
                for n in self.nodes
            ],
        }

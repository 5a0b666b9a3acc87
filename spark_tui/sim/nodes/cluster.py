"""`SimCluster`: start N simulated Sparks, write their inventory and known_hosts, stop them."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from spark_tui.core.inventory import InventoryNode, inventory_to_yaml
from spark_tui.sim.nodes.gb10 import primary_netdev
from spark_tui.sim.nodes.images import bundled_image_refs
from spark_tui.sim.nodes.node import (
    SimNode,
    load_or_create_key,
    remove_tree,
    socket_dir_for,
    write_vllm_shim,
)
from spark_tui.sim.nodes.scenario import Scenario


class SimCluster:
    """N simulated Sparks (all simulated), usable as an async context manager.

    `async with SimCluster(Scenario(nodes=2)) as cluster:` starts every node, then
    `cluster.inventory_path` names an inventory YAML (host, port, user, identity_file,
    known_hosts per node) that every spark-tui command accepts, and `cluster.nodes` holds
    the `SimNode`s. Leaving the block stops the SSH servers and Docker APIs and kills every
    container's process group. Without `state_dir` the files live in a temp dir that is
    removed at the end; `inventory_path` may put the inventory elsewhere.
    """

    def __init__(
        self,
        scenario: Scenario | None = None,
        *,
        state_dir: str | Path | None = None,
        inventory_path: str | Path | None = None,
        image_refs: list[str] | None = None,
    ) -> None:
        self.scenario = scenario or Scenario()
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

    async def start(self) -> None:
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
        self._started = True
        try:
            await asyncio.gather(*(n.start() for n in self.nodes))
        except BaseException:
            await self.close()
            raise
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
        self.inventory_path.write_text(
            "# Simulated DGX Sparks (spark-tui sim): loopback SSH servers, no GPU.\n"
            + inventory_to_yaml(self.inventory)
        )

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
        if not self._started:
            return
        self._started = False
        await asyncio.gather(*(n.close() for n in self.nodes), return_exceptions=True)
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

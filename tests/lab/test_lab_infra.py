"""The lab itself, for real: SSH with host-key checks, GB10 shims, one dockerd per node behind
its SSH-forwarded socket, the engine image with `--gpus all`, traffic between nodes."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import asyncssh
import docker
import pytest
from docker.types import DeviceRequest
from labkit import lab_guard

from spark_tui.core.inventory import InventoryNode
from spark_tui.remote import probe_commands
from spark_tui.remote.parsers import parse_ip_addr, split_ip_batch
from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.image import LAB_IMAGE, recipe_images
from spark_tui.sim.lab.shims import mem_total_kb

lab_guard()

pytestmark = pytest.mark.lab

GPUS_ALL = [DeviceRequest(count=-1, capabilities=[["gpu"]])]


async def _connect(
    node: InventoryNode, known_hosts: str | None = None
) -> asyncssh.SSHClientConnection:
    return await asyncssh.connect(
        node.host,
        port=node.port or 22,
        username=node.user,
        client_keys=[node.identity_file],
        known_hosts=known_hosts if known_hosts is not None else node.known_hosts,
        config=[],
        connect_timeout=10,
    )


def _client(lab: Lab, index: int) -> docker.DockerClient:
    return docker.DockerClient(base_url=f"unix://{lab.node(index).docker_socket}", timeout=60)


def _info_and_ids(socket_path: str) -> tuple[dict[str, Any], set[str]]:
    client = docker.DockerClient(base_url=f"unix://{socket_path}", timeout=30)
    try:
        return client.info(), {c.id for c in client.containers.list(all=True)}
    finally:
        client.close()


async def test_every_node_answers_ssh_with_a_verified_host_key(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    for layout, node in zip(lab.nodes, lab_nodes, strict=True):
        async with await _connect(node) as conn:
            res = await conn.run("hostname; echo $SPARK_LAB_NODE", check=True, timeout=10)
        assert str(res.stdout).split() == [layout.name, layout.name]


async def test_an_unknown_host_key_is_refused_unless_accepted(
    lab: Lab, lab_nodes: list[InventoryNode], tmp_path: Path
) -> None:
    from spark_tui.remote.hostkeys import HostKeyError
    from spark_tui.remote.ssh import NodeConnection

    head = lab_nodes[0]
    # asyncssh itself, with a known_hosts that lacks the node's key: refused.
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        async with await _connect(head, known_hosts=str(empty)):
            pass
    # Another host's key recorded for this address is a changed key: refused too.
    other_key = lab.node(2).host_key.with_name(lab.node(2).host_key.name + ".pub")
    changed = tmp_path / "changed_known_hosts"
    changed.write_text(f"{head.host} {' '.join(other_key.read_text().split()[:2])}\n")
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        async with await _connect(head, known_hosts=str(changed)):
            pass
    # The remote layer: unknown and not accepted is a HostKeyError (exit 3) ...
    unknown = InventoryNode(**{**head.to_dict(), "known_hosts": str(empty)})
    refused = NodeConnection(unknown, ssh_config=(), reconnect_attempts=0)
    with pytest.raises(HostKeyError):
        await refused.connect()
    await refused.close()
    # ... and accepted, it connects and records the key it was shown.
    accepted = NodeConnection(unknown, ssh_config=(), accept_new_host_keys=True)
    try:
        await accepted.connect()
        res = await accepted.run("hostname", timeout=10)
        assert res.stdout.strip() == lab.node(1).name
    finally:
        await accepted.close()
    recorded = empty.read_text()
    own_key = lab.node(1).host_key.with_name(lab.node(1).host_key.name + ".pub").read_text()
    assert own_key.split()[1] in recorded and head.host in recorded


async def test_gb10_shims_answer_the_probe_commands_with_each_nodes_names(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    seen_ifnames = []
    for layout, node in zip(lab.nodes, lab_nodes, strict=True):
        async with await _connect(node) as conn:
            smi = await conn.run(probe_commands.NVIDIA_SMI_QUERY, check=True, timeout=10)
            table = await conn.run(probe_commands.NVIDIA_SMI, check=True, timeout=10)
            ib = await conn.run(probe_commands.IBDEV2NETDEV, check=True, timeout=10)
            mem = await conn.run(probe_commands.MEMINFO, check=True, timeout=10)
            addr = await conn.run(probe_commands.IP_ADDR_JSON, check=True, timeout=10)
            batch = await conn.run(probe_commands.IP_JSON, check=True, timeout=10)
            names = [
                await conn.run(cmd, check=True, timeout=10)
                for cmd in (probe_commands.HOSTNAME, "hostname", probe_commands.ARCH, "uname -m")
            ]
        # The builtins' reads print what the tools print, on the node's own namespaces.
        assert names[0].stdout == names[1].stdout and names[2].stdout == names[3].stdout
        batch_addr, batch_neigh = split_ip_batch(str(batch.stdout))
        assert sorted(parse_ip_addr(batch_addr)) == sorted(parse_ip_addr(str(addr.stdout)))
        assert batch_neigh.startswith("[")
        assert smi.stdout == "NVIDIA GB10, 580.95.05, [N/A], [N/A]\n"
        assert "Not Supported" in str(table.stdout) and "NVIDIA GB10" in str(table.stdout)
        rdma = "roce" + layout.ifname[2:].rsplit("np", 1)[0]
        assert ib.stdout == f"{rdma} port 1 ==> {layout.ifname} (Up)\n"
        total_kb = int(str(mem.stdout).splitlines()[0].split()[1])
        assert total_kb == mem_total_kb(lab.cfg.memory_gb)
        assert f'"ifname":"{layout.ifname}"' in str(addr.stdout)
        assert f'"local":"{layout.address}"' in str(addr.stdout)
        seen_ifnames.append(layout.ifname)
    assert len(set(seen_ifnames)) == len(seen_ifnames)


def test_engine_image_runs_with_gpus_all_under_every_recipe_tag(lab: Lab) -> None:
    tags = [LAB_IMAGE, *recipe_images()]
    ids = set()
    for index in range(1, lab.cfg.nodes + 1):
        client = _client(lab, index)
        try:
            for tag in tags:
                ids.add(client.images.get(tag).id)
            code = (
                "import os, shutil, spark_tui.sim.engine as e; "
                "print(e.SIMULATED_BANNER, os.environ['NVIDIA_VISIBLE_DEVICES'], "
                "os.environ['SPARK_SIM_PACE'], shutil.which('vllm'), shutil.which('nvidia-smi'))"
            )
            out = client.containers.run(
                tags[-1],
                ["python3", "-c", code],
                device_requests=GPUS_ALL,
                network_mode="host",
                remove=True,
            )
        finally:
            client.close()
        assert out.decode().split() == [
            *"spark-tui simulated engine (no GPU)".split(),
            "all",
            "0.05",
            "/usr/local/bin/vllm",
            "/usr/local/bin/nvidia-smi",
        ]
    # One image, the same id on every node, under every tag.
    assert len(ids) == 1


async def test_each_nodes_own_dockerd_is_reachable_through_its_ssh_forward(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    marker = {}
    for index in (1, 2):
        client = _client(lab, index)
        c = client.containers.create(LAB_IMAGE, ["true"], labels={"lab-test": f"node{index}"})
        marker[index] = c.id
        client.close()
    forward_dir = tempfile.mkdtemp(prefix="lab-fwd-")
    try:
        for index, node in enumerate(lab_nodes, start=1):
            async with await _connect(node) as conn:
                local = os.path.join(forward_dir, f"n{index}.sock")
                listener = await conn.forward_local_path(local, "/var/run/docker.sock")
                # The Docker SDK blocks: run it off the event loop that serves the forward.
                info, ids = await asyncio.to_thread(_info_and_ids, local)
                listener.close()
            assert info["Name"] == lab.node(index).name
            assert marker[index] in ids
            assert marker[3 - index] not in ids
    finally:
        for index in (1, 2):
            client = _client(lab, index)
            client.containers.get(marker[index]).remove(force=True)
            client.close()
        shutil.rmtree(forward_dir, ignore_errors=True)


async def test_remote_layer_forwards_the_default_docker_socket(
    lab: Lab, lab_nodes: list[InventoryNode]
) -> None:
    from spark_tui.remote.ssh import NodeConnection

    for index, node in enumerate(lab_nodes, start=1):
        conn = NodeConnection(node, ssh_config=())
        try:
            local = await conn.forward_docker_socket()
            info, _ids = await asyncio.to_thread(_info_and_ids, local)
            assert info["Name"] == lab.node(index).name
        finally:
            await conn.close()


def test_containers_on_one_node_reach_the_other_node(lab: Lab) -> None:
    head, worker = lab.node(1), lab.node(2)
    server = _client(lab, 1)
    client = _client(lab, 2)
    port = 18431
    srv = server.containers.run(
        LAB_IMAGE,
        ["python3", "-m", "http.server", str(port), "--bind", head.address, "--directory", "/etc"],
        network_mode="host",
        detach=True,
    )
    try:
        code = (
            "import sys, time, urllib.request\n"
            "for _ in range(100):\n"
            "    try:\n"
            "        print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode()); break\n"
            "    except OSError:\n"
            "        time.sleep(0.1)\n"
        )
        out = client.containers.run(
            LAB_IMAGE,
            ["python3", "-c", code, f"http://{head.address}:{port}/passwd"],
            network_mode="host",
            remove=True,
        )
        assert out.decode().startswith("root:x:0:0:")
        # The request came from the worker node's own address, across the bridge.
        assert f"{worker.address} - - " in srv.logs().decode()
    finally:
        srv.remove(force=True)
        server.close()
        client.close()

"""Simulated Sparks over real SSH: probe commands, real commands, auth and forwarding."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest
import yaml

from spark_tui.core.inventory import parse_inventory
from spark_tui.remote import probe_commands as pc
from spark_tui.remote.parsers import parse_hf_cache_scan
from spark_tui.sim.engine import catalogue
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base
from spark_tui.sim.nodes.hf_cache import bundled_models


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    scenario = Scenario(
        nodes=2,
        memory_gb=128,
        page_cache_gb=12,
        page_cache_nodes=(2,),
        ssh_port=0,
        base_address=random_loopback_base(),
    )
    async with SimCluster(scenario) as c:
        yield c


def _connect(cluster: SimCluster, index: int, **kw: object) -> asyncssh.connect:
    node = cluster.nodes[index]
    options: dict[str, object] = {
        "username": node.user,
        "client_keys": [str(cluster.identity_file)],
        "known_hosts": str(cluster.known_hosts_path),
    }
    options.update(kw)
    return asyncssh.connect(node.address, node.port, **options)


async def _run(conn: asyncssh.SSHClientConnection, command: str) -> str:
    result = await conn.run(command, check=True)
    assert isinstance(result.stdout, str)
    return result.stdout


def _meminfo(text: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\S+):\s+(\d+)", text, re.M)}


async def test_inventory_and_known_hosts_describe_every_node(cluster: SimCluster) -> None:
    nodes = parse_inventory(cluster.inventory_path.read_text())
    assert [n.name for n in nodes] == ["sim-spark-1", "sim-spark-2"]
    for inv, node in zip(nodes, cluster.nodes, strict=True):
        assert (inv.host, inv.port, inv.user) == (node.address, node.port, node.user)
        assert inv.identity_file == str(cluster.identity_file)
        assert inv.known_hosts == str(cluster.known_hosts_path)
    lines = cluster.known_hosts_path.read_text().splitlines()
    assert [line.split()[0] for line in lines] == [f"[{n.host}]:{n.port}" for n in nodes]
    assert all(line.split()[1] == "ssh-ed25519" for line in lines)
    assert yaml.safe_load(cluster.inventory_path.read_text())["nodes"][0]["name"] == "sim-spark-1"


async def test_probe_commands_answer_as_gb10(cluster: SimCluster) -> None:
    async with _connect(cluster, 0) as one, _connect(cluster, 1) as two:
        assert await _run(one, pc.HOSTNAME) == "sim-spark-1\n"
        assert await _run(one, pc.ARCH) == "aarch64\n"
        smi = await _run(one, pc.NVIDIA_SMI)
        assert "NVIDIA GB10" in smi and "Not Supported" in smi
        assert await _run(one, pc.NVIDIA_SMI_QUERY) == "NVIDIA GB10, 580.95.05, [N/A], [N/A]\n"
        assert (await _run(one, pc.HOME)).strip() == str(cluster.nodes[0].home)
        ib_one, ib_two = await _run(one, pc.IBDEV2NETDEV), await _run(two, pc.IBDEV2NETDEV)
        up_one = {m[1] for m in re.finditer(r"==> (\S+) \(Up\)", ib_one)}
        up_two = {m[1] for m in re.finditer(r"==> (\S+) \(Up\)", ib_two)}
        assert up_one == {"enp1s0f1np1", "enP2p1s0f1np1"}
        assert up_two == {"enp1s0f0np0", "enP2p1s0f0np0"}
        links = json.loads(await _run(two, pc.IP_ADDR_JSON))
        ipv4 = {
            e["ifname"]: a["local"]
            for e in links
            for a in e["addr_info"]
            if a["family"] == "inet" and e["ifname"].startswith("enp1")
        }
        assert ipv4 == {"enp1s0f0np0": cluster.nodes[1].address}
        neigh = json.loads(await _run(two, pc.IP_NEIGH_JSON))
        assert [n["dst"] for n in neigh] == [cluster.nodes[0].address]
        speeds = await _run(one, pc.NET_SPEEDS)
        assert "enp1s0f1np1 200000\n" in speeds
        disk = await _run(one, pc.DISK_FREE)
        assert disk.splitlines()[0].startswith("Filesystem") and len(disk.splitlines()) == 2


async def test_meminfo_follows_the_scenario_per_node(cluster: SimCluster) -> None:
    async with _connect(cluster, 0) as one, _connect(cluster, 1) as two:
        plain = _meminfo(await _run(one, pc.MEMINFO))
        cached = _meminfo(await _run(two, pc.MEMINFO))
    assert plain["MemTotal"] == cached["MemTotal"] == 125513720
    assert cached["Cached"] - plain["Cached"] == 12 * 2**30 // 1024
    assert plain["MemFree"] - cached["MemFree"] == 12 * 2**30 // 1024


async def test_drop_caches_frees_the_simulated_page_cache(cluster: SimCluster) -> None:
    async with _connect(cluster, 1) as two:
        before = _meminfo(await _run(two, pc.MEMINFO))
        out = await _run(two, "sync; echo 3 | sudo tee /proc/sys/vm/drop_caches")
        after = _meminfo(await _run(two, pc.MEMINFO))
    assert out == "3\n"
    assert before["Cached"] - after["Cached"] == 12 * 2**30 // 1024
    assert cluster.nodes[1].page_cache_bytes == 0


async def test_hf_cache_scan_lists_the_catalogue_models(cluster: SimCluster) -> None:
    async with _connect(cluster, 0) as one:
        out = await _run(one, pc.HF_CACHE_SCAN)
    models = parse_hf_cache_scan(out)
    wanted = [model_id for model_id, _ in bundled_models()]
    assert len(models) == len(wanted) >= 6
    seen = {}
    for model in models:
        total = catalogue.lookup(model.repo_id).weight_bytes
        assert model.config == catalogue.hf_config(model.repo_id)
        assert model.weight_bytes == total
        assert model.files is not None and "config.json" in model.files
        assert model.size_bytes is not None and model.size_bytes >= total  # sparse shards
        seen[model.repo_id] = model.size_bytes
    assert sorted(seen) == sorted(wanted)
    assert "nvidia/GLM-5.3-Flash-FP4-Local" in seen


async def test_real_commands_run_in_the_node_home_with_their_exit_status(
    cluster: SimCluster,
) -> None:
    async with _connect(cluster, 0) as one:
        result = await one.run("mkdir -p models/x && cd models && pwd && echo oops >&2; exit 7")
        feed = await one.run("cat", input="fed through stdin\n")
    assert result.exit_status == 7
    assert result.stdout == f"{cluster.nodes[0].home}/models\n"
    assert result.stderr == "oops\n"
    assert (cluster.nodes[0].home / "models" / "x").is_dir()
    assert feed.stdout == "fed through stdin\n"


async def test_closing_the_channel_kills_the_command_group(cluster: SimCluster) -> None:
    async with _connect(cluster, 0) as one:
        proc = await one.create_process("sleep 30 & echo $!; wait")
        pid = int(await asyncio.wait_for(proc.stdout.readline(), 5))
        assert Path(f"/proc/{pid}").exists()
        proc.close()
        for _ in range(100):
            if not _alive(pid):
                break
            await asyncio.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_key_only_auth_for_the_node_user(cluster: SimCluster, tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519")
    with pytest.raises(asyncssh.PermissionDenied):
        async with _connect(cluster, 0, client_keys=[other]):
            pass
    with pytest.raises(asyncssh.PermissionDenied):
        async with _connect(cluster, 0, username="intruder"):
            pass
    with pytest.raises(asyncssh.PermissionDenied):
        async with _connect(cluster, 0, client_keys=None, password="x", agent_path=None):
            pass


async def test_a_wrong_host_key_is_refused(cluster: SimCluster, tmp_path: Path) -> None:
    one, two = cluster.nodes
    wrong = tmp_path / "known_hosts"
    key = two.host_key.export_public_key().decode().split()
    wrong.write_text(f"[{one.address}]:{one.port} {key[0]} {key[1]}\n")
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        async with _connect(cluster, 0, known_hosts=str(wrong)):
            pass


async def test_forwarding_reaches_only_this_node_and_its_docker_socket(
    cluster: SimCluster, tmp_path: Path
) -> None:
    one = cluster.nodes[0]
    served = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.set()
        writer.write(b"node-local service\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, one.address, 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _connect(cluster, 0) as conn:
            # 127.0.0.1 on the node is the node's own address.
            reader, writer = await conn.open_connection("127.0.0.1", port)
            assert await reader.readline() == b"node-local service\n"
            writer.close()
            with pytest.raises(asyncssh.ChannelOpenError):
                await conn.open_connection("192.0.2.1", 80)
            with pytest.raises(asyncssh.ChannelOpenError):
                await conn.open_unix_connection("/etc/passwd")
            reader, writer = await conn.open_unix_connection("/var/run/docker.sock")
            writer.write(b"GET /_ping HTTP/1.1\r\nHost: docker\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK")
            assert await reader.readexactly(2) == b"OK"
            writer.close()
    finally:
        server.close()
        await server.wait_closed()
    assert served.is_set()


async def test_closing_the_cluster_removes_its_temp_files() -> None:
    scenario = Scenario(nodes=1, ssh_port=0, base_address=random_loopback_base(1))
    async with SimCluster(scenario) as c:
        state = c.state_dir
        assert (state / "nodes" / "sim-spark-1" / "home").is_dir()
        sock = c.nodes[0].docker_socket
        assert sock.exists()
    assert not state.exists()
    assert not os.path.exists(sock)


async def test_stopping_the_cluster_ends_running_commands_and_connections() -> None:
    scenario = Scenario(nodes=1, ssh_port=0, base_address=random_loopback_base(1))
    cluster = SimCluster(scenario)
    await cluster.start()
    try:
        conn = await _connect(cluster, 0)
        proc = await conn.create_process("sleep 30 & echo $!; wait")
        pid = int(await asyncio.wait_for(proc.stdout.readline(), 5))
    finally:
        await cluster.close()
    await asyncio.wait_for(conn.wait_closed(), 5)
    for _ in range(100):
        if not _alive(pid):
            break
        await asyncio.sleep(0.05)
    assert not _alive(pid)

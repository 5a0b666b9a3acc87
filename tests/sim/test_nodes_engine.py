"""Containers on simulated nodes run the simulated vLLM engine, reachable through SSH."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncssh
import docker
import httpx
import pytest

from spark_tui.remote import probe_commands as pc
from spark_tui.sim.nodes import Scenario, SimCluster, SimNode, random_loopback_base
from spark_tui.sim.nodes.docker_engine import gpu_memory_utilization
from spark_tui.sim.nodes.images import bundled_image_refs

IMAGE = bundled_image_refs()[0]
MODEL = "Qwen/Qwen3-0.6B"
READY = "Application startup complete."
# uvicorn logs READY before its socket listens; this line once it answers.
LISTENING = "Uvicorn running on"


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def _meminfo(text: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\S+):\s+(\d+)", text, re.M)}


def _follow_until(container: Any, needle: str, seconds: float = 40) -> list[str]:
    """Log lines up to the one containing `needle` (or the container's end)."""
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    for chunk in container.logs(stream=True, follow=True):
        lines.append(chunk.decode(errors="replace"))
        if needle in lines[-1] or time.monotonic() > deadline:
            break
    return lines


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    scenario = Scenario(
        nodes=2,
        ssh_port=0,
        base_address=random_loopback_base(),
        pace=0.05,
        token_scale=0.01,
        worker_dies_after=0.5,
    )
    async with SimCluster(scenario) as c:
        yield c


def _connect(cluster: SimCluster, node: SimNode) -> asyncssh.connect:
    return asyncssh.connect(
        node.address,
        node.port,
        username=node.user,
        client_keys=[str(cluster.identity_file)],
        known_hosts=str(cluster.known_hosts_path),
    )


async def test_an_engine_container_serves_through_ssh_forwards(
    cluster: SimCluster, tmp_path: Path
) -> None:
    node = cluster.nodes[0]
    port = _free_port(node.address)
    async with _connect(cluster, node) as conn:
        before = _meminfo((await conn.run(pc.MEMINFO, check=True)).stdout)
        sock = tmp_path / "docker.sock"
        docker_fwd = await conn.forward_local_path(str(sock), "/var/run/docker.sock")

        def launch() -> list[str]:
            client = docker.DockerClient(base_url=f"unix://{sock}")
            try:
                c = client.containers.create(
                    IMAGE,
                    ["vllm", "serve", MODEL, "--host", "0.0.0.0", "--port", str(port)],
                    name="engine",
                    network_mode="host",
                    environment={"VLLM_LOGGING_LEVEL": "INFO"},
                )
                c.start()
                return _follow_until(c, LISTENING)
            finally:
                client.close()

        lines = await asyncio.to_thread(launch)
        assert LISTENING in lines[-1], "".join(lines[-20:])
        text = "".join(lines)
        assert "Starting vLLM server on" in text and "Loading safetensors checkpoint shards" in text
        # The API answers through a direct-tcpip forward to the node's own port.
        api_fwd = await conn.forward_local_port("127.0.0.1", 0, "127.0.0.1", port)
        base = f"http://127.0.0.1:{api_fwd.get_port()}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            health = await http.get("/health")
            models = (await http.get("/v1/models")).json()
        assert health.status_code == 200
        assert models["data"][0]["id"] == MODEL
        during = _meminfo((await conn.run(pc.MEMINFO, check=True)).stdout)
        smi = (await conn.run(pc.NVIDIA_SMI, check=True)).stdout
        held = 0.9 * node.scenario.mem_total_kb  # vLLM's default gpu_memory_utilization
        assert before["MemAvailable"] - during["MemAvailable"] == pytest.approx(held, rel=0.01)
        assert "No running processes found" not in smi and "python3" in smi

        def stop() -> dict[str, Any]:
            client = docker.DockerClient(base_url=f"unix://{sock}")
            try:
                c = client.containers.get("engine")
                c.stop(timeout=5)
                c.reload()
                state = dict(c.attrs["State"])
                c.remove()
                return state
            finally:
                client.close()

        state = await asyncio.to_thread(stop)
        after = _meminfo((await conn.run(pc.MEMINFO, check=True)).stdout)
        api_fwd.close()
        docker_fwd.close()
    assert state["Status"] == "exited"
    assert after["MemAvailable"] == before["MemAvailable"]


async def test_a_worker_that_dies_after_ready_takes_the_head_down_at_the_next_request(
    cluster: SimCluster,
) -> None:
    head, worker = cluster.nodes
    master_port = _free_port(head.address)
    api_port = _free_port(head.address)
    common = ["--tensor-parallel-size", "2", "--nnodes", "2", "--master-addr", head.address]
    common += ["--master-port", str(master_port)]

    def run() -> tuple[dict[str, Any], dict[str, Any], str, str]:
        clients = [docker.DockerClient(base_url=f"unix://{n.docker_socket}") for n in cluster.nodes]
        try:
            h = clients[0].containers.run(
                IMAGE,
                ["vllm", "serve", MODEL, *common, "--node-rank", "0", "--port", str(api_port)],
                detach=True,
                name="rank0",
            )
            w = clients[1].containers.run(
                IMAGE,
                ["vllm", "serve", MODEL, *common, "--node-rank", "1", "--headless"],
                detach=True,
                name="rank1",
            )
            worker_state = w.wait(timeout=60)
            # As real vLLM: the head keeps /health at 200 until a request needs the engine;
            # that request fails with 500 and the head then exits.
            base = f"http://{head.address}:{api_port}"
            health = httpx.get(base + "/health", timeout=10).status_code
            body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
            answer = httpx.post(base + "/v1/chat/completions", json=body, timeout=30)
            head_state = h.wait(timeout=60)
            head_state["health_after_worker_death"] = health
            head_state["request_status"] = answer.status_code
            return worker_state, head_state, h.logs().decode(), w.logs().decode()
        finally:
            for c in clients:
                c.close()

    worker_state, head_state, head_log, worker_log = await asyncio.to_thread(run)
    assert READY in head_log, head_log[-2000:]
    assert worker_state["StatusCode"] != 0, worker_log[-2000:]
    assert head_state["health_after_worker_death"] == 200
    assert head_state["request_status"] == 500
    assert head_state["StatusCode"] != 0
    assert "NCCL" in head_log.split(READY, 1)[1] or "gloo" in head_log.split(READY, 1)[1]


async def test_page_cache_fails_the_engine_until_caches_are_dropped() -> None:
    scenario = Scenario(
        nodes=1, ssh_port=0, base_address=random_loopback_base(1), pace=0.05, page_cache_gb=60
    )
    async with SimCluster(scenario) as cluster:
        node = cluster.nodes[0]
        argv = ["vllm", "serve", MODEL, "--port", str(_free_port(node.address))]

        def run(name: str) -> tuple[int, str]:
            client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
            try:
                c = client.containers.run(IMAGE, argv, detach=True, name=name)
                lines = _follow_until(c, READY)
                c.reload()
                code = -1 if c.status == "running" else int(c.attrs["State"]["ExitCode"])
                c.remove(force=True)
                return code, "".join(lines)
            finally:
                client.close()

        code, log = await asyncio.to_thread(run, "cached")
        assert code == 1, log[-1500:]
        assert "Free memory on device" in log and "less than desired GPU memory" in log
        async with _connect(cluster, node) as conn:
            await conn.run("sudo sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'", check=True)
        code, log = await asyncio.to_thread(run, "dropped")
        assert code == -1 and READY in log, log[-1500:]


async def test_a_second_engine_on_a_busy_node_finds_no_free_memory(cluster: SimCluster) -> None:
    node = cluster.nodes[0]

    def run() -> str:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        try:
            first = client.containers.run(
                IMAGE,
                ["vllm", "serve", MODEL, "--port", str(_free_port(node.address))],
                detach=True,
            )
            _follow_until(first, READY)
            second = client.containers.run(
                IMAGE,
                ["vllm", "serve", MODEL, "--port", str(_free_port(node.address))],
                detach=True,
            )
            second.wait(timeout=30)
            return second.logs().decode()
        finally:
            client.close()

    log = await asyncio.to_thread(run)
    assert "Free memory on device" in log, log[-1500:]


@pytest.mark.parametrize(
    ("argv", "held"),
    [
        (["vllm", "serve", MODEL], 0.9),
        (["vllm", "serve", MODEL, "--gpu-memory-utilization=0.5"], 0.5),
        (["bash", "-c", f"vllm serve {MODEL} --gpu-memory-utilization 0.7"], 0.7),
        # The flag check's container prints the flag table and exits: no engine, no memory
        # (a node probed while it runs must not look full).
        (["vllm", "serve", "--help=all"], None),
        (["vllm", "serve", MODEL, "--gpu-memory-utilization", "0.5", "-h"], None),
        (["vllm", "--version"], None),
        (["python3", "-c", "print(1)"], None),
    ],
)
def test_only_a_serving_engine_holds_memory(argv: list[str], held: float | None) -> None:
    assert gpu_memory_utilization(argv) == held

"""The unmodified Docker SDK against a simulated node, through an SSH-forwarded socket."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncssh
import docker
import docker.errors
import pytest

from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base
from spark_tui.sim.nodes.images import bundled_image_refs

T = TypeVar("T")
IMAGE = bundled_image_refs()[0]  # every bundled recipe's image is on every simulated node


@dataclass
class Forwarded:
    """A cluster, an SSH connection to node 1 and the local end of its forwarded socket."""

    cluster: SimCluster
    conn: asyncssh.SSHClientConnection
    socket: Path

    async def sdk(self, fn: Callable[[docker.DockerClient], T]) -> T:
        def call() -> T:
            client = docker.DockerClient(base_url=f"unix://{self.socket}")
            try:
                return fn(client)
            finally:
                client.close()

        return await asyncio.to_thread(call)


@pytest.fixture
async def fwd(tmp_path: Path) -> AsyncIterator[Forwarded]:
    scenario = Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(), odd_digest_node=2)
    async with SimCluster(scenario) as cluster:
        node = cluster.nodes[0]
        async with asyncssh.connect(
            node.address,
            node.port,
            username=node.user,
            client_keys=[str(cluster.identity_file)],
            known_hosts=str(cluster.known_hosts_path),
        ) as conn:
            local = tmp_path / "docker.sock"
            listener = await conn.forward_local_path(str(local), "/var/run/docker.sock")
            try:
                yield Forwarded(cluster, conn, local)
            finally:
                listener.close()


async def test_create_start_follow_stop_remove_through_ssh(fwd: Forwarded) -> None:
    """The Done-means: the SDK runs a container's whole life over the forwarded socket."""

    def life(client: docker.DockerClient) -> dict[str, Any]:
        assert client.ping() is True
        container = client.containers.create(
            IMAGE,
            ["sh", "-c", "echo starting; echo warming >&2; sleep 0.3; echo serving; sleep 60"],
            name="spark-tui-rank0",
            labels={"spark-tui.cluster": "c1", "spark-tui.rank": "0"},
            environment={"NCCL_SOCKET_IFNAME": "enp1s0f1np1"},
            privileged=True,
            ipc_mode="host",
            network_mode="host",
            shm_size="16g",
            ulimits=[docker.types.Ulimit(name="memlock", soft=-1, hard=-1)],
            device_requests=[docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])],
            volumes={"/tmp/hf": {"bind": "/root/.cache/huggingface", "mode": "rw"}},
        )
        assert container.status == "created"
        container.start()
        lines = []
        for chunk in container.logs(stream=True, follow=True):
            lines.append(chunk.decode())
            if chunk == b"serving\n":
                break
        container.reload()
        running = dict(container.attrs["State"])
        started = time.monotonic()
        container.stop(timeout=5)
        stop_seconds = time.monotonic() - started
        container.reload()
        stopped = dict(container.attrs["State"])
        attrs = container.attrs
        container.remove()
        with pytest.raises(docker.errors.NotFound):
            client.containers.get("spark-tui-rank0")
        return {
            "lines": lines,
            "running": running,
            "stopped": stopped,
            "attrs": attrs,
            "stop_seconds": stop_seconds,
        }

    out = await fwd.sdk(life)
    assert out["lines"] == ["starting\n", "warming\n", "serving\n"]
    assert out["running"]["Status"] == "running" and out["running"]["Running"] is True
    assert out["running"]["Pid"] > 0 and out["running"]["StartedAt"].endswith("Z")
    assert out["stopped"]["Status"] == "exited" and out["stopped"]["Running"] is False
    assert out["stopped"]["ExitCode"] == 143  # SIGTERM, as Docker reports it
    assert out["stopped"]["FinishedAt"] > out["stopped"]["StartedAt"]
    assert out["stop_seconds"] < 3  # sh dies on SIGTERM: no wait for the timeout
    attrs = out["attrs"]
    assert attrs["Name"] == "/spark-tui-rank0"
    assert attrs["Config"]["Labels"]["spark-tui.rank"] == "0"
    assert "NCCL_SOCKET_IFNAME=enp1s0f1np1" in attrs["Config"]["Env"]
    host = attrs["HostConfig"]
    assert host["Privileged"] is True and host["IpcMode"] == "host"
    assert host["NetworkMode"] == "host" and host["ShmSize"] == 16 * 2**30
    assert host["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
    assert attrs["Mounts"][0]["Destination"] == "/root/.cache/huggingface"


async def test_the_process_group_is_gone_after_remove(fwd: Forwarded) -> None:
    def run(client: docker.DockerClient) -> int:
        c = client.containers.run(
            IMAGE, ["sh", "-c", "sleep 60 & sleep 60"], detach=True, name="group"
        )
        c.reload()
        pid = int(c.attrs["State"]["Pid"])
        c.remove(force=True)
        return pid

    pid = await fwd.sdk(run)
    children = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _pgid(p) == pid]
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid)
    assert all(_zombie(int(p.name)) for p in children)


def _pgid(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


async def test_stop_sends_sigterm_then_sigkill_after_the_timeout(fwd: Forwarded) -> None:
    def stubborn(client: docker.DockerClient) -> tuple[int, float]:
        c = client.containers.run(
            IMAGE, ["sh", "-c", "trap '' TERM; echo ready; sleep 30"], detach=True
        )
        for chunk in c.logs(stream=True, follow=True):
            if chunk == b"ready\n":
                break
        started = time.monotonic()
        c.stop(timeout=1)
        took = time.monotonic() - started
        c.reload()
        code = c.attrs["State"]["ExitCode"]
        c.remove()
        return code, took

    code, took = await fwd.sdk(stubborn)
    assert code == 137
    assert 0.9 <= took < 5


async def test_kill_wait_and_exit_codes(fwd: Forwarded) -> None:
    def run(client: docker.DockerClient) -> tuple[dict[str, Any], dict[str, Any], str]:
        quick = client.containers.run(IMAGE, ["sh", "-c", "exit 3"], detach=True)
        waited = quick.wait(timeout=10)
        slow = client.containers.run(IMAGE, ["sleep", "30"], detach=True)
        slow.kill()
        killed = slow.wait(timeout=10)
        with pytest.raises(docker.errors.APIError) as not_running:
            slow.kill()
        return waited, killed, str(not_running.value)

    waited, killed, message = await fwd.sdk(run)
    assert waited == {"Error": None, "StatusCode": 3}
    assert killed["StatusCode"] == 137
    assert "is not running" in message


async def test_label_and_name_filters(fwd: Forwarded) -> None:
    def run(client: docker.DockerClient) -> dict[str, list[str]]:
        for rank, cluster in ((0, "a"), (1, "a"), (0, "b")):
            client.containers.create(
                IMAGE,
                ["true"],
                name=f"sim-{cluster}-{rank}",
                labels={"spark-tui.cluster": cluster, "spark-tui.rank": str(rank)},
            )
        client.containers.run(IMAGE, ["sleep", "30"], detach=True, name="busy")

        def names(**kw: Any) -> list[str]:
            return sorted(c.name for c in client.containers.list(**kw))

        return {
            "running": names(),
            "all": names(all=True),
            "cluster_a": names(all=True, filters={"label": "spark-tui.cluster=a"}),
            "rank0": names(all=True, filters={"label": ["spark-tui.rank=0"]}),
            "both": names(all=True, filters={"label": ["spark-tui.cluster=a", "spark-tui.rank=1"]}),
            "has_label": names(all=True, filters={"label": "spark-tui.cluster"}),
            "by_name": names(all=True, filters={"name": "sim-b"}),
            "exited": names(all=True, filters={"status": "created"}),
        }

    got = await fwd.sdk(run)
    assert got["running"] == ["busy"]
    assert got["all"] == ["busy", "sim-a-0", "sim-a-1", "sim-b-0"]
    assert got["cluster_a"] == ["sim-a-0", "sim-a-1"]
    assert got["rank0"] == ["sim-a-0", "sim-b-0"]
    assert got["both"] == ["sim-a-1"]
    assert got["has_label"] == ["sim-a-0", "sim-a-1", "sim-b-0"]
    assert got["by_name"] == ["sim-b-0"]
    assert got["exited"] == ["sim-a-0", "sim-a-1", "sim-b-0"]


async def test_errors_come_back_as_docker_errors(fwd: Forwarded) -> None:
    def run(client: docker.DockerClient) -> dict[str, str]:
        errors = {}
        with pytest.raises(docker.errors.ImageNotFound) as missing:
            client.containers.create("nvcr.io/nvidia/vllm:no-such-tag", ["true"])
        errors["image"] = str(missing.value)
        client.containers.create(IMAGE, ["sleep", "30"], name="taken").start()
        with pytest.raises(docker.errors.APIError) as clash:
            client.containers.create(IMAGE, ["true"], name="taken")
        errors["clash"] = str(clash.value)
        with pytest.raises(docker.errors.APIError) as running:
            client.containers.get("taken").remove()
        errors["running"] = str(running.value)
        with pytest.raises(docker.errors.NotFound):
            client.containers.get("nope")
        with pytest.raises(docker.errors.APIError) as runtime:
            client.containers.create(IMAGE, ["true"], runtime="crun")
        errors["runtime"] = str(runtime.value)
        with pytest.raises(docker.errors.APIError) as missing_exe:
            client.containers.run(IMAGE, ["no-such-program-here"], detach=True)
        errors["exe"] = str(missing_exe.value)
        with pytest.raises(docker.errors.NotFound) as pull:
            client.images.pull("example.com/private/model", tag="1")
        errors["pull"] = str(pull.value)
        return errors

    e = await fwd.sdk(run)
    assert "No such image: nvcr.io/nvidia/vllm:no-such-tag" in e["image"]
    assert "409" in e["clash"] and 'name "/taken" is already in use' in e["clash"]
    assert "409" in e["running"] and "container is running" in e["running"]
    assert "unknown or invalid runtime name: crun" in e["runtime"]
    assert 'exec: "no-such-program-here": executable file not found' in e["exe"]
    assert "pull access denied" in e["pull"]


async def test_images_carry_digests_and_one_node_differs(fwd: Forwarded, tmp_path: Path) -> None:
    def images(client: docker.DockerClient) -> dict[str, list[str]]:
        return {t: i.attrs["RepoDigests"] for i in client.images.list() for t in i.tags}

    one = await fwd.sdk(images)
    assert sorted(one) == bundled_image_refs()
    assert all(d[0].startswith(t.rsplit(":", 1)[0] + "@sha256:") for t, d in one.items())
    other = fwd.cluster.nodes[1]
    local = tmp_path / "two.sock"
    async with asyncssh.connect(
        other.address,
        other.port,
        username=other.user,
        client_keys=[str(fwd.cluster.identity_file)],
        known_hosts=str(fwd.cluster.known_hosts_path),
    ) as conn:
        listener = await conn.forward_local_path(str(local), "/run/docker.sock")
        two = await Forwarded(fwd.cluster, conn, local).sdk(images)
        listener.close()
    assert sorted(two) == sorted(one)
    assert all(two[t] != one[t] for t in one)  # the odd node's builds differ

    def inspect(client: docker.DockerClient) -> tuple[str, str, str]:
        image = client.images.get(IMAGE)
        by_digest = client.images.get(image.attrs["RepoDigests"][0])
        return image.id, by_digest.id, client.info()["Architecture"]

    image_id, digest_id, arch = await fwd.sdk(inspect)
    assert image_id == digest_id and arch == "aarch64"

    def pull(client: docker.DockerClient) -> list[dict[str, Any]]:
        return list(client.api.pull(IMAGE, stream=True, decode=True))

    events = await fwd.sdk(pull)
    assert events[-1]["status"] == f"Status: Image is up to date for {IMAGE}"


async def test_version_info_and_raw_api_paths(fwd: Forwarded) -> None:
    def run(client: docker.DockerClient) -> dict[str, Any]:
        api = client.api
        head = api.head(api.base_url + "/_ping")  # APIClient is a requests.Session
        return {
            "version": client.version(),
            "info": client.info(),
            "head": (head.status_code, head.headers.get("Api-Version"), head.content),
            "prefixed": api.get(api.base_url + "/v1.41/version").json(),
            "api_version": api.api_version,
        }

    got = await fwd.sdk(run)
    assert got["version"]["Version"] == "29.2.1" and got["version"]["Arch"] == "arm64"
    assert got["prefixed"]["ApiVersion"] == got["api_version"] == got["version"]["ApiVersion"]
    assert got["head"][0] == 200 and got["head"][2] == b""
    info = got["info"]
    assert info["Name"] == "sim-spark-1" and "nvidia" in info["Runtimes"]
    assert info["MemTotal"] == fwd.cluster.nodes[0].scenario.mem_total_bytes
    assert "simulated" in info["OperatingSystem"]

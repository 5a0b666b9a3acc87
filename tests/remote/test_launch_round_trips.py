"""Docker round trips of a launch over a node's SSH connection, counted on simulated Sparks
(the SDK's own requests, through its public response hooks): each is a request through the
forwarded socket, a few milliseconds on a real node before the head's container starts."""

from __future__ import annotations

from typing import Any

from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.remote.probe import probe_pool
from spark_tui.remote.ssh import ConnectionPool
from spark_tui.sim.nodes import SimCluster


def counted(docker: RemoteDocker) -> list[str]:
    """Every request the node's Docker client makes from now on, as `METHOD path`."""
    seen: list[str] = []

    def hook(resp: Any, *args: Any, **kwargs: Any) -> None:
        path = resp.request.path_url.split("?", 1)[0]
        seen.append(f"{resp.request.method} {path.split('/', 2)[-1]}")

    docker.client.api.hooks["response"].append(hook)
    return seen


async def test_create_is_one_request_with_every_option(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        async with ConnectionPool(sim.inventory, ssh_config=None) as pool:
            recipe = find_recipe("glm-5.3-flash")
            plan = build_plan(recipe, apply_overrides(recipe, []), await probe_pool(pool))
            head = plan.head
            docker = await RemoteDocker.open(pool[head.node])
            try:
                seen = counted(docker)
                made = await docker.create(head.container, {"HF_TOKEN": "hf_x"})
                assert seen == ["POST containers/create"]  # no inspect after it
                info = await docker.inspect(head.container.name)
                assert info is not None and info["Id"].startswith(made[:12])
                host = info["HostConfig"]
                spec = head.container
                assert host["NetworkMode"] == spec.docker.network
                assert host["IpcMode"] == spec.docker.ipc
                assert bool(host["Privileged"]) is bool(spec.docker.privileged)
                binds = {b.split(":")[0]: b.split(":")[1] for b in host["Binds"] or []}
                assert binds == dict(spec.mounts)
                assert spec.labels.items() <= info["Config"]["Labels"].items()
                assert "HF_TOKEN=hf_x" in info["Config"]["Env"]
            finally:
                await docker.remove(head.container.name, stop_timeout=1)
                await docker.close()

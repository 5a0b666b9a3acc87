"""Probe against simulated Sparks (spark_tui.sim.nodes): facts, host keys, unreachable nodes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from spark_tui import cli
from spark_tui.core.errors import EXIT_UNREACHABLE, UnreachableError
from spark_tui.core.inventory import inventory_to_yaml
from spark_tui.remote.hostkeys import HostKeyError
from spark_tui.remote.probe import probe_nodes
from spark_tui.sim.nodes import SimCluster

NO_CONFIG = {"ssh_config": None}


async def test_probe_two_nodes(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        facts = await probe_nodes(sim.inventory, **NO_CONFIG)
    head, worker = facts
    assert [f.name for f in facts] == [n.name for n in sim.inventory]
    for f, node in zip(facts, sim.nodes, strict=True):
        assert f.errors == []
        assert f.address == node.address
        assert f.gpu_name == "NVIDIA GB10"
        assert f.arch == "aarch64"
        assert f.driver_version and f.cuda_version == "13.0"
        # GB10 memory comes from /proc/meminfo: a 128 GB Spark shows ~119.7 GiB.
        assert f.memory_total_bytes is not None and 119 < f.memory_total_bytes / 2**30 < 121
        assert f.memory_available_bytes is not None
        assert f.memory_available_bytes <= f.memory_total_bytes
        assert f.home == str(node.home)
        assert f.docker_version
        assert f.disk_free_bytes and f.disk_free_bytes > 0
        assert f.containers == []
    # The cable sits in a different port on each node: the interface names differ.
    assert head.connectx_up[0].netdev != worker.connectx_up[0].netdev
    assert head.cluster_address == sim.nodes[0].address
    assert all(i.speed_mbps == 200000 for i in head.connectx_up)
    # Images with digests, the same on both nodes.
    glm_image = {i.ref: i for i in head.images}
    assert glm_image and all(i.digest and i.digest.startswith("sha256:") for i in head.images)
    assert {i.ref: i.digest for i in worker.images} == {r: i.digest for r, i in glm_image.items()}
    # The Hugging Face cache: models with revisions, sizes, config and safetensors total.
    glm = next(m for m in head.models if m.repo_id == "nvidia/GLM-5.3-Flash-FP4-Local")
    assert glm.revision and len(glm.revision) == 40
    assert glm.config and glm.config.get("num_hidden_layers")
    assert glm.weight_bytes and glm.size_bytes and glm.size_bytes >= glm.weight_bytes


async def test_probe_json_round_trips_through_facts_format(sim_scenario) -> None:
    from spark_tui.core.facts import facts_to_json, parse_facts

    async with SimCluster(sim_scenario(2)) as sim:
        facts = await probe_nodes(sim.inventory, **NO_CONFIG)
    again = parse_facts(facts_to_json(facts))
    assert [f.to_dict() for f in again] == [f.to_dict() for f in facts]


async def test_unknown_host_key_refused_unless_accepted(sim_scenario, tmp_path: Path) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        kh = tmp_path / "known_hosts"
        nodes = [type(n)(**{**n.__dict__, "known_hosts": str(kh)}) for n in sim.inventory]
        with pytest.raises(HostKeyError) as err:
            await probe_nodes(nodes, **NO_CONFIG)
        assert "2 of 2 nodes" in err.value.message
        assert sim.nodes[0].host_key.get_fingerprint("sha256") in err.value.message
        assert not kh.exists()
        facts = await probe_nodes(nodes, accept_new_host_keys=True, **NO_CONFIG)
        assert all(f.errors == [] for f in facts)
        accepted = set(kh.read_text().splitlines())
        assert accepted == set(sim.known_hosts_path.read_text().splitlines())


async def test_one_node_down_partial_and_error(sim_scenario) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        await sim.nodes[1].close()
        facts = await probe_nodes(sim.inventory, partial=True, **NO_CONFIG)
        head, down = facts
        assert head.errors == [] and head.memory_total_bytes
        assert down.memory_total_bytes is None
        assert "connection refused" in down.errors[0] and "remedy" in down.errors[0]
        with pytest.raises(UnreachableError) as err:
            await probe_nodes(sim.inventory, **NO_CONFIG)
        assert err.value.message.startswith(f"{sim.nodes[1].name} (")
        assert err.value.exit_code == EXIT_UNREACHABLE


async def test_cli_probe_exit_3_with_partial_facts(sim_scenario, capsys) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        await sim.nodes[1].close()
        code = await asyncio.to_thread(
            cli.main, ["probe", "--inventory", str(sim.inventory_path), "--json"]
        )
    out, err = capsys.readouterr()
    assert code == EXIT_UNREACHABLE
    nodes = json.loads(out)["nodes"]
    assert nodes[0]["memory_total_bytes"] and nodes[1]["errors"]
    assert f"spark-tui: {sim.nodes[1].name}" in err and "remedy:" in err


async def test_cli_probe_human(sim_scenario, capsys) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        code = await asyncio.to_thread(cli.main, ["probe", "--inventory", str(sim.inventory_path)])
    out, err = capsys.readouterr()
    assert code == 0
    assert "NVIDIA GB10" in out and "cx7" in out and "head" in out
    assert "probing 2 node(s)" in err


async def test_inventory_yaml_with_hosts_only_uses_defaults(sim_scenario, tmp_path: Path) -> None:
    # The inventory format round-trips what the simulator wrote.
    async with SimCluster(sim_scenario(1)) as sim:
        text = inventory_to_yaml(sim.inventory)
        path = tmp_path / "inv.yaml"
        path.write_text(text)
        from spark_tui.service.targets import Targets, inventory_nodes

        assert inventory_nodes(Targets(inventory=str(path))) == sim.inventory


async def test_probe_runs_every_command_in_one_session_per_node(sim_scenario) -> None:
    # Each session costs the node's sshd a fork and a login: with many nodes' sshd on few
    # cores, one session per command made the probe grow with the node count.
    async with SimCluster(sim_scenario(2)) as sim:
        facts = await probe_nodes(sim.inventory, docker=False, **NO_CONFIG)
        assert [n.exec_sessions for n in sim.nodes] == [1, 1]
    assert all(f.errors == [] and f.hostname and f.models and f.disk_free_bytes for f in facts)

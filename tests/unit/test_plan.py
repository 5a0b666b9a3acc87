"""The launch plan: per-rank argv, env, mounts, labels and docker options, checked against
the exact commands of NVIDIA's two-Spark playbook (seed 004, copied to tests/fixtures)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from spark_tui.core.errors import FactsError, InputError, RecipeError
from spark_tui.core.facts import GIB, Interface, NodeFacts
from spark_tui.core.network_env import network_env
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import (
    CACHE_MOUNTS,
    build_plan,
    default_cluster_id,
    resolve_argv,
    resolve_secrets,
    set_flag,
    settings_hash,
)
from spark_tui.core.recipe import Recipe
from spark_tui.core.recipe_loader import find_recipe

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "004_dfc9594d758c1f7f.txt"
HEAD_IP = "192.168.100.10"
WORKER_IP = "192.168.100.11"


# --- nodes ---------------------------------------------------------------------------


def head_node(memory_gb: int = 128, home: str | None = "/home/nvidia") -> NodeFacts:
    """A head whose cable is in port f1 (the playbook's ibdev2netdev output)."""
    return NodeFacts(
        name="spark-a",
        address="10.0.0.1",
        home=home,
        memory_total_bytes=memory_gb * GIB,
        interfaces=[
            Interface("enP2p1s0f0np0", "roceP2p1s0f0", "down"),
            Interface("enp1s0f1np1", "rocep1s0f1", "up", HEAD_IP, 200000),
            Interface("enP2p1s0f1np1", "roceP2p1s0f1", "up", None, 200000),
            Interface("enp1s0f0np0", "rocep1s0f0", "down"),
        ],
    )


def worker_node(memory_gb: int = 128, home: str | None = "/home/ubuntu") -> NodeFacts:
    """A worker whose ConnectX names differ from the head's (its twin port carries the IP)."""
    return NodeFacts(
        name="spark-b",
        address="10.0.0.2",
        home=home,
        memory_total_bytes=memory_gb * GIB,
        interfaces=[
            Interface("enP2p1s0f1np1", "roceP2p1s0f1", "up", WORKER_IP, 200000),
            Interface("enp1s0f1np1", "rocep1s0f1", "up", None, 200000),
        ],
    )


def cluster(n: int) -> list[NodeFacts]:
    nodes = []
    for i in range(n):
        eth = "enp1s0f0np0" if i % 2 else "enP2p1s0f0np0"
        nodes.append(
            NodeFacts(
                name=f"spark-{i}",
                address=f"10.0.0.{i + 1}",
                home="/home/nvidia",
                interfaces=[Interface(eth, f"roce{i}", "up", f"192.168.50.{i + 1}")],
            )
        )
    return nodes


def simple_recipe(command: str, **kw: object) -> Recipe:
    defaults = {"port": 8000}
    defaults.update(kw.pop("defaults", {}))  # type: ignore[arg-type]
    return Recipe(
        name="test-recipe",
        model="org/model",
        command=command,
        container="example/vllm:1",
        defaults=defaults,
        **kw,  # type: ignore[arg-type]
    )


# --- the seed's commands -------------------------------------------------------------


def _bash_block_after(text: str, heading: str) -> str:
    start = text.index(heading)
    block = text.index("```bash\n", start) + len("```bash\n")
    return text[block : text.index("```", block)]


def seed_model_block(heading: str) -> tuple[dict[str, str], list[str]]:
    """The exports and the `vllm serve` argv of one model section of the playbook."""
    block = _bash_block_after(SEED.read_text(encoding="utf-8"), heading)
    exports: dict[str, str] = {}
    for line in block.splitlines():
        if line.startswith("export "):
            key, value = shlex.split(line)[1].split("=", 1)
            exports[key] = value
    command = block[block.index("vllm serve") :].replace("\\\n", " ")
    return exports, shlex.split(command)


def seed_docker_env() -> dict[str, str]:
    """The `-e K=V` pairs of the playbook's `docker run`, with the shell references."""
    block = _bash_block_after(SEED.read_text(encoding="utf-8"), "**Then, run this Docker command")
    tokens = shlex.split(block[block.index("docker run") :].replace("\\\n", " "))
    pairs = [tokens[i + 1] for i, t in enumerate(tokens) if t == "-e"]
    return dict(p.split("=", 1) for p in pairs)


def expected_argv(seed_argv: list[str], node_args: list[str]) -> list[str]:
    out: list[str] = []
    for token in seed_argv:
        if token == "${NODE_ARGS[@]}":
            out += node_args
        else:
            out.append(token.replace("$HEAD_IP", HEAD_IP).replace("$MASTER_PORT", "29501"))
    return out


def expected_docker_env(node: NodeFacts) -> dict[str, str]:
    cx = [i for i in node.interfaces if i.is_up]
    eth = next(i.netdev for i in cx if i.ipv4)
    ib = ",".join(i.rdma_device or "" for i in cx)
    values = {
        "$ETH_IF": eth,
        "$IB_IF": ib,
        "$HEAD_IP": HEAD_IP,
        "$MASTER_PORT": "29501",
        "${HF_TOKEN:-}": "${HF_TOKEN}",
    }
    return {k: values.get(v, v) for k, v in seed_docker_env().items()}


PLAYBOOK = [
    ("glm-5.3-flash", "### GLM 5.3 Flash on two 128GB Sparks", 128),
    ("qwen3.8-flash-next", "### Qwen3.8 Flash-Next on two 64GB Sparks", 64),
]


@pytest.mark.parametrize(("name", "heading", "memory_gb"), PLAYBOOK)
def test_playbook_recipes_match_the_seed_exactly(name: str, heading: str, memory_gb: int) -> None:
    exports, seed_argv = seed_model_block(heading)
    recipe = find_recipe(name)
    head, worker = head_node(memory_gb), worker_node(memory_gb)
    plan = build_plan(recipe, apply_overrides(recipe, []), [head, worker])

    r0, r1 = plan.ranks
    assert r0.argv == expected_argv(seed_argv, ["--node-rank", "0"])
    assert r1.argv == expected_argv(seed_argv, ["--node-rank", "1", "--headless"])
    assert (r0.role, r1.role) == ("head", "worker")
    assert r0.container.image == r1.container.image == "eugr/spark-vllm-b12x:nightly-20261015"

    for rank, node in ((r0, head), (r1, worker)):
        for key, value in exports.items():
            assert rank.env.get(key) == value, (rank.node, key)
        for key, value in expected_docker_env(node).items():
            assert rank.env.get(key) == value, (rank.node, key)
        assert rank.container.env == rank.env
        assert rank.container.command == rank.argv
    # Each node's own interface names, never the head's copied to the worker.
    assert r0.env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert r1.env["NCCL_SOCKET_IFNAME"] == "enP2p1s0f1np1"
    assert r1.env["NCCL_IB_HCA"] == "roceP2p1s0f1,rocep1s0f1"
    assert r0.env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert plan.endpoint["port"] == 8000
    assert plan.endpoint["address"] == "10.0.0.1"
    assert plan.rendezvous == {"master_addr": HEAD_IP, "master_port": 29501}


def test_seed_parser_reads_what_the_seed_says() -> None:
    # Guards the expectations above: the fixture parse finds the playbook's real values.
    exports, argv = seed_model_block("### GLM 5.3 Flash on two 128GB Sparks")
    assert exports["VLLM_ENABLE_PCIE_ALLREDUCE"] == "0" and len(exports) == 15
    assert argv[:3] == ["vllm", "serve", "nvidia/GLM-5.3-Flash-FP4-Local"]
    assert argv[-7:] == [
        "--nnodes",
        "2",
        "--master-addr",
        "$HEAD_IP",
        "--master-port",
        "$MASTER_PORT",
        "${NODE_ARGS[@]}",
    ]
    env = seed_docker_env()
    assert list(env) == [
        "HF_TOKEN",
        "MN_IF_NAME",
        "UCX_NET_DEVICES",
        "NCCL_SOCKET_IFNAME",
        "NCCL_IB_HCA",
        "NCCL_IB_DISABLE",
        "NCCL_IGNORE_CPU_AFFINITY",
        "OMPI_MCA_btl_tcp_if_include",
        "GLOO_SOCKET_IFNAME",
        "TP_SOCKET_IFNAME",
        "HEAD_IP",
        "MASTER_PORT",
    ]


def test_docker_options_and_mounts_as_the_playbook() -> None:
    recipe = find_recipe("glm-5.3-flash")
    plan = build_plan(recipe, apply_overrides(recipe, []), [head_node(), worker_node()])
    d = plan.to_dict()["ranks"][1]["docker"]
    assert d == {
        "privileged": True,
        "gpus": "all",
        "ipc": "host",
        "network": "host",
        "shm_size": "16g",
        "ulimits": {"nofile": "1048576:1048576", "memlock": "-1", "stack": "67108864"},
    }
    assert plan.ranks[1].container.mounts == {
        "/home/ubuntu/.cache/huggingface": "/root/.cache/huggingface",
        "/home/ubuntu/.cache/vllm": "/root/.cache/vllm",
        "/home/ubuntu/.cache/flashinfer": "/root/.cache/flashinfer",
        "/home/ubuntu/.triton": "/root/.triton",
        "/home/ubuntu/.cache/b12x": "/root/.cache/b12x",
    }
    assert len(CACHE_MOUNTS) == 5


def test_unknown_home_falls_back_to_root_with_a_note() -> None:
    recipe = find_recipe("glm-5.3-flash")
    plan = build_plan(recipe, apply_overrides(recipe, []), [head_node(), worker_node(home=None)])
    assert "/root/.cache/huggingface" in plan.ranks[1].container.mounts
    assert any("spark-b" in n and "home directory unknown" in n for n in plan.notes)
    assert not any("spark-a" in n and "home" in n for n in plan.notes)


def test_json_format_of_issue_2() -> None:
    recipe = find_recipe("glm-5.3-flash")
    plan = build_plan(recipe, apply_overrides(recipe, []), [head_node(), worker_node()])
    data = json.loads(json.dumps(plan.to_dict()))
    assert {"cluster_id", "recipe", "settings", "ranks", "endpoint"} <= set(data)
    for i, rank in enumerate(data["ranks"]):
        assert {
            "rank",
            "role",
            "node",
            "address",
            "container_name",
            "image",
            "argv",
            "env",
            "mounts",
            "docker",
        } <= set(rank)
        assert rank["rank"] == i
        assert rank["argv"][0] == "vllm"
        assert rank["container_name"] == f"spark-tui-{data['cluster_id']}-r{i}"
    assert data["recipe"] == "glm-5.3-flash"
    assert data["settings"]["tensor_parallel"] == 2


def test_labels_name_cluster_rank_recipe_and_settings_hash() -> None:
    recipe = find_recipe("glm-5.3-flash")
    settings = apply_overrides(recipe, [])
    plan = build_plan(recipe, settings, [head_node(), worker_node()])
    labels = plan.ranks[1].container.labels
    assert labels == {
        "spark-tui.cluster": plan.cluster_id,
        "spark-tui.rank": "1",
        "spark-tui.role": "worker",
        "spark-tui.recipe": "glm-5.3-flash",
        "spark-tui.settings-hash": settings_hash(settings),
        "spark-tui.node": "spark-b",
        "spark-tui.model": "nvidia/GLM-5.3-Flash-FP4-Local",
    }
    # Stable for the same recipe on the same nodes; different on other nodes.
    again = build_plan(
        recipe, apply_overrides(recipe, ["max_num_seqs=2"]), [head_node(), worker_node()]
    )
    assert again.cluster_id == plan.cluster_id
    assert again.settings_hash != plan.settings_hash
    assert default_cluster_id("glm-5.3-flash", ["x", "y"]) != plan.cluster_id
    named = build_plan(recipe, settings, [head_node(), worker_node()], cluster_id="demo1")
    assert named.ranks[0].container.name == "spark-tui-demo1-r0"
    with pytest.raises(InputError):
        build_plan(recipe, settings, [head_node(), worker_node()], cluster_id="Bad Id; rm")


def test_settings_hash_is_canonical() -> None:
    assert settings_hash({"a": 1, "b": 2}) == settings_hash({"b": 2, "a": 1})
    assert settings_hash({"a": 1}) != settings_hash({"a": 2})
    assert re.fullmatch(r"[0-9a-f]{12}", settings_hash({}))


# --- layouts -------------------------------------------------------------------------


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_four_node_tensor_parallel() -> None:
    recipe = simple_recipe("vllm serve {model} --port {port}")
    nodes = cluster(4)
    plan = build_plan(recipe, apply_overrides(recipe, ["tensor_parallel=4"]), nodes)
    for rank in plan.ranks:
        argv = rank.argv
        assert _flag(argv, "--tensor-parallel-size") == "4"
        assert _flag(argv, "--nnodes") == "4"
        assert _flag(argv, "--node-rank") == str(rank.rank)
        assert _flag(argv, "--master-addr") == "192.168.50.1"
        assert ("--headless" in argv) == (rank.rank > 0)
        assert rank.env["HEAD_IP"] == "192.168.50.1"
        assert rank.env["NCCL_SOCKET_IFNAME"] == nodes[rank.rank].interfaces[0].netdev
        assert "--data-parallel-rank" not in argv
    assert [r.serves_api for r in plan.ranks] == [True, False, False, False]


def test_four_node_tensor_times_pipeline() -> None:
    recipe = simple_recipe("vllm serve {model} --port {port} -tp {tensor_parallel}")
    sets = ["tensor_parallel=2", "pipeline_parallel=2"]
    plan = build_plan(recipe, apply_overrides(recipe, sets), cluster(4))
    assert (plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel) == (2, 2, 1)
    assert [_flag(r.argv, "--nnodes") for r in plan.ranks] == ["4"] * 4
    assert [_flag(r.argv, "--node-rank") for r in plan.ranks] == ["0", "1", "2", "3"]
    assert _flag(plan.ranks[3].argv, "-tp") == "2"


def test_pure_data_parallel_is_one_api_on_the_head_and_headless_replicas() -> None:
    # vLLM 0.32 refuses the per-node form (--data-parallel-rank everywhere) for a dense
    # model; this is the form it runs: the head's API balances over every replica's engine.
    recipe = simple_recipe("vllm serve {model} --port {port} --data-parallel-rank 5")
    nodes = cluster(3)
    plan = build_plan(recipe, apply_overrides(recipe, ["data_parallel=3"]), nodes)
    for rank in plan.ranks:
        argv = rank.argv
        assert argv.count("--data-parallel-size") == 1
        assert _flag(argv, "--data-parallel-size") == "3"
        assert _flag(argv, "--data-parallel-size-local") == "1"
        assert _flag(argv, "--data-parallel-address") == "192.168.50.1"
        assert _flag(argv, "--data-parallel-rpc-port") == "13345"
        assert "--data-parallel-rank" not in argv
        assert _flag(argv, "--data-parallel-start-rank") == (str(rank.rank) if rank.rank else None)
        assert ("--headless" in argv) == (rank.rank > 0)
        for flag in ("--nnodes", "--node-rank", "--master-addr", "--master-port"):
            assert flag not in argv
        assert rank.serves_api == (rank.rank == 0)
        assert rank.replica == rank.rank
        # One API process on the head, so vLLM keeps every replica's stats lines.
        assert _flag(argv, "--api-server-count") == ("1" if rank.rank == 0 else None)
    assert plan.rendezvous["data_parallel_rpc_port"] == 13345
    assert [r["node"] for r in plan.endpoint["replicas"]] == ["spark-0"]


def test_eight_node_hybrid_tensor_times_data_parallel() -> None:
    recipe = simple_recipe(
        "vllm serve {model} --port {port}", defaults={"data_parallel_rpc_port": 14000}
    )
    nodes = cluster(8)
    sets = ["tensor_parallel=2", "data_parallel=4"]
    plan = build_plan(recipe, apply_overrides(recipe, sets), nodes)
    for rank in plan.ranks:
        replica, intra = divmod(rank.rank, 2)
        argv = rank.argv
        # vLLM 0.32 counts nodes over the whole deployment and derives each one's replica
        # from its node rank; the replicas are one world (a MoE model's), met at the head.
        assert _flag(argv, "--nnodes") == "8"
        assert _flag(argv, "--node-rank") == str(rank.rank)
        assert _flag(argv, "--master-addr") == "192.168.50.1"
        assert ("--headless" in argv) == (rank.rank > 0)
        assert _flag(argv, "--data-parallel-size") == "4"
        assert _flag(argv, "--data-parallel-size-local") == "1"
        assert _flag(argv, "--data-parallel-start-rank") == (str(replica) if rank.rank else None)
        assert "--data-parallel-rank" not in argv
        assert _flag(argv, "--data-parallel-address") == "192.168.50.1"
        assert _flag(argv, "--data-parallel-rpc-port") == "14000"
        assert rank.env["HEAD_IP"] == "192.168.50.1"
        assert rank.replica == replica
        assert rank.serves_api == (rank.rank == 0)
    # Both flag sets, torch rendezvous first as in the playbook, then data parallel.
    argv = plan.ranks[5].argv
    assert (
        argv.index("--master-port")
        < argv.index("--node-rank")
        < argv.index("--data-parallel-start-rank")
    )


def test_too_few_nodes_for_the_layout_is_refused() -> None:
    recipe = find_recipe("glm-5.3-flash")
    with pytest.raises(InputError) as err:
        build_plan(recipe, apply_overrides(recipe, []), cluster(1))
    assert "TP 2 x PP 1 x DP 1 = 2 nodes; only 1 given" in err.value.message
    assert "give 2 nodes" in err.value.remedy


def test_more_nodes_than_the_layout_uses_the_first_ones() -> None:
    recipe = find_recipe("glm-5.3-flash")
    nodes = cluster(3)
    plan = build_plan(recipe, apply_overrides(recipe, []), nodes)
    assert [r.node for r in plan.ranks] == [nodes[0].name, nodes[1].name]
    assert plan.nodes_left_out == [nodes[2].name]
    data = plan.to_dict()
    assert data["nodes_used"] == [nodes[0].name, nodes[1].name]
    assert data["nodes_left_out"] == [nodes[2].name]
    assert any(f"left out: {nodes[2].name}" in note for note in plan.notes)
    # Same cluster id as a plan given only the nodes it uses.
    assert plan.cluster_id == build_plan(recipe, apply_overrides(recipe, []), nodes[:2]).cluster_id
    assert (
        "--nnodes" in plan.head.argv and plan.head.argv[plan.head.argv.index("--nnodes") + 1] == "2"
    )


def test_single_node_has_no_rendezvous_flags() -> None:
    recipe = simple_recipe("vllm serve {model} --port {port}")
    plan = build_plan(recipe, apply_overrides(recipe, []), cluster(1))
    assert plan.ranks[0].argv == ["vllm", "serve", "org/model", "--port", "8000"]
    assert plan.ranks[0].role == "head"


# --- never duplicate a flag ----------------------------------------------------------


def test_template_master_port_is_replaced_not_duplicated() -> None:
    recipe = simple_recipe(
        "vllm serve {model} --master-port 29600 --port {port} --nnodes 9",
        defaults={"tensor_parallel": 2},
    )
    plan = build_plan(recipe, apply_overrides(recipe, []), cluster(2))
    for rank in plan.ranks:
        argv = rank.argv
        assert argv.count("--master-port") == 1 and argv.count("--nnodes") == 1
        assert _flag(argv, "--master-port") == "29600"  # the template's port wins the default
        assert _flag(argv, "--nnodes") == "2"  # the plan's count replaces a wrong one
        assert argv[3:5] == ["--master-port", "29600"]  # replaced in place
        assert rank.env["MASTER_PORT"] == "29600"
    assert plan.rendezvous["master_port"] == 29600
    # An explicit setting wins over the template.
    moved = build_plan(recipe, apply_overrides(recipe, ["master_port=29700"]), cluster(2))
    assert [a for a in moved.ranks[1].argv if a.startswith("297")] == ["29700"]
    assert moved.ranks[1].argv.count("--master-port") == 1


def test_set_flag_replaces_any_spelling_once() -> None:
    argv = ["vllm", "serve", "m", "--master_port=1", "--x", "--master-port", "2"]
    assert set_flag(argv, "--master-port", "3") == ["vllm", "serve", "m", "--master_port=3", "--x"]
    assert set_flag(["vllm", "serve", "m", "--headless"], "--headless", False) == [
        "vllm",
        "serve",
        "m",
    ]
    assert set_flag(["vllm", "serve", "m"], "--headless", True)[-1] == "--headless"


# --- ray -----------------------------------------------------------------------------


def test_ray_plan_forms_a_cluster_then_serves_on_the_head() -> None:
    recipe = simple_recipe(
        "vllm serve {model} --port {port} --distributed-executor-backend ray",
        runtime="vllm-ray",
        defaults={"tensor_parallel": 2},
    )
    plan = build_plan(recipe, apply_overrides(recipe, []), [head_node(), worker_node()])
    head, worker = plan.ranks
    assert plan.runtime == "vllm-ray"
    assert (head.role, worker.role) == ("ray-head", "ray-worker")
    assert head.argv[:5] == ["ray", "start", "--head", "--port", "46379"]
    assert "--block" in head.argv and _flag(head.argv, "--node-ip-address") == HEAD_IP
    assert _flag(worker.argv, "--address") == f"{HEAD_IP}:46379"
    assert _flag(worker.argv, "--node-ip-address") == WORKER_IP
    assert worker.env["VLLM_HOST_IP"] == WORKER_IP
    assert worker.env["NCCL_SOCKET_IFNAME"] == "enP2p1s0f1np1"
    assert plan.serve_exec is not None and plan.serve_exec[:2] == ["vllm", "serve"]
    assert plan.serve_exec.count("--distributed-executor-backend") == 1
    assert _flag(plan.serve_exec, "--distributed-executor-backend") == "ray"
    assert "--nnodes" not in plan.serve_exec and "--headless" not in plan.serve_exec
    assert plan.to_dict()["serve_exec"] == plan.serve_exec


def test_ray_backend_setting_adds_the_flag_once() -> None:
    recipe = simple_recipe(
        "vllm serve {model} --port {port}",
        runtime="vllm-ray",
        defaults={"tensor_parallel": 2, "distributed_executor_backend": "ray"},
    )
    plan = build_plan(recipe, apply_overrides(recipe, []), cluster(2))
    assert plan.serve_exec is not None
    assert plan.serve_exec.count("--distributed-executor-backend") == 1


def test_ray_rejects_data_parallel() -> None:
    recipe = simple_recipe("vllm serve {model} --port {port}", runtime="vllm-ray")
    with pytest.raises(InputError) as err:
        build_plan(recipe, apply_overrides(recipe, ["data_parallel=2"]), cluster(2))
    assert "vllm-ray" in err.value.message and "data_parallel=1" in err.value.remedy


# --- network facts -------------------------------------------------------------------


def test_network_env_from_the_nodes_own_facts() -> None:
    env = network_env(worker_node())
    assert env == {
        "MN_IF_NAME": "enP2p1s0f1np1",
        "UCX_NET_DEVICES": "enP2p1s0f1np1",
        "NCCL_SOCKET_IFNAME": "enP2p1s0f1np1",
        "NCCL_IB_HCA": "roceP2p1s0f1,rocep1s0f1",
        "NCCL_IB_DISABLE": "0",
        "NCCL_IGNORE_CPU_AFFINITY": "1",
        "OMPI_MCA_btl_tcp_if_include": "enP2p1s0f1np1",
        "GLOO_SOCKET_IFNAME": "enP2p1s0f1np1",
        "TP_SOCKET_IFNAME": "enP2p1s0f1np1",
    }


def test_node_without_connectx_link_is_refused_with_a_remedy() -> None:
    down = worker_node()
    for iface in down.interfaces:
        iface.state = "down"
    with pytest.raises(FactsError) as err:
        network_env(down)
    assert "ibdev2netdev" in err.value.remedy and "spark-b" in err.value.message
    recipe = find_recipe("glm-5.3-flash")
    with pytest.raises(FactsError):
        build_plan(recipe, apply_overrides(recipe, []), [head_node(), down])
    no_ip = worker_node()
    for iface in no_ip.interfaces:
        iface.ipv4 = None
    with pytest.raises(FactsError) as err:
        network_env(no_ip)
    assert "no IPv4" in err.value.message


# --- secrets -------------------------------------------------------------------------


def test_secrets_only_as_references_even_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_SUPERSECRET123")
    recipe = simple_recipe(
        "vllm serve {model} --port {port} --api-key literal-key-456",
        defaults={"tensor_parallel": 2},
        env={"MY_SERVICE_PASSWORD": "pw-789", "OTHER_TOKEN": "${OTHER_TOKEN}", "PLAIN": "x"},
    )
    plan = build_plan(recipe, apply_overrides(recipe, []), cluster(2))
    text = json.dumps(plan.to_dict()) + plan.to_shell()
    for secret in ("hf_SUPERSECRET123", "literal-key-456", "pw-789"):
        assert secret not in text
    env = plan.ranks[1].env
    assert env["HF_TOKEN"] == "${HF_TOKEN}"
    assert env["MY_SERVICE_PASSWORD"] == "${MY_SERVICE_PASSWORD}"
    assert env["OTHER_TOKEN"] == "${OTHER_TOKEN}"
    assert env["PLAIN"] == "x"
    # The API key travels as the variable vLLM reads, never on the command line.
    for rank in plan.ranks:
        assert "--api-key" not in " ".join(rank.argv)
        assert rank.env["VLLM_API_KEY"] == "${VLLM_API_KEY}"
    # The ops layer fills the references at launch time from its own environment.
    local = {"HF_TOKEN": "hf_x", "MY_SERVICE_PASSWORD": "pw", "VLLM_API_KEY": "k"}
    resolved = resolve_secrets(env, local)
    assert resolved["HF_TOKEN"] == "hf_x" and resolved["MY_SERVICE_PASSWORD"] == "pw"
    assert resolved["OTHER_TOKEN"] == "" and resolved["PLAIN"] == "x"
    assert resolved["VLLM_API_KEY"] == "k"
    assert resolve_secrets({"A": "${B:-dflt}"}, {}) == {"A": "dflt"}


@pytest.mark.parametrize("flags", ["--api-key {key}", "--api-key={key}", "--api_key {key}"])
def test_api_key_reference_moves_to_the_environment(flags: str) -> None:
    recipe = simple_recipe(
        f"vllm serve {{model}} --port {{port}} {flags} --max-num-seqs 4",
        defaults={"key": "${MY_KEY}"},
        env={"MY_KEY": "${MY_KEY}"},
    )
    plan = build_plan(recipe, apply_overrides(recipe, []), cluster(1))
    argv = plan.ranks[0].argv
    assert "${MY_KEY}" not in argv and not any("api" in t for t in argv)
    assert argv[-2:] == ["--max-num-seqs", "4"]
    assert plan.ranks[0].env["VLLM_API_KEY"] == "${MY_KEY}"
    resolved = resolve_secrets(plan.ranks[0].env, {"MY_KEY": "sk-1"})
    assert resolved["VLLM_API_KEY"] == "sk-1"
    assert "sk-1" not in json.dumps(plan.to_dict()) + plan.to_shell()


def test_undeclared_variable_in_the_command_is_refused() -> None:
    # The reference arrives as a value (a default, or --set), not as template text.
    recipe = simple_recipe("vllm serve {model} --port {port}")
    sets = ["served_model_name=${AWS_SECRET_ACCESS_KEY}"]
    with pytest.raises(RecipeError) as err:
        build_plan(recipe, apply_overrides(recipe, sets), cluster(1))
    assert "${AWS_SECRET_ACCESS_KEY}" in err.value.message
    assert "env:" in err.value.remedy and "AWS_SECRET_ACCESS_KEY: ${AWS_SECRET_ACCESS_KEY}" in (
        err.value.remedy
    )
    # Declared in the recipe's env, it is passed on purpose.
    ok = simple_recipe(
        "vllm serve {model} --port {port} --served-model-name {alias}",
        defaults={"alias": "${ALIAS}"},
        env={"ALIAS": "${ALIAS}"},
    )
    plan = build_plan(ok, apply_overrides(ok, []), cluster(1))
    rank_env = resolve_secrets(plan.ranks[0].env, {"ALIAS": "my-model", "OTHER": "x"})
    assert resolve_argv(plan.ranks[0].argv, rank_env)[-1] == "my-model"


def test_resolve_argv_reads_only_the_rank_environment() -> None:
    # Even a plan built elsewhere cannot pull a variable the container does not get.
    with pytest.raises(RecipeError) as err:
        resolve_argv(["vllm", "serve", "m", "--x", "${AWS_SECRET_ACCESS_KEY}"], {"HF_TOKEN": "t"})
    assert "AWS_SECRET_ACCESS_KEY" in err.value.message
    assert resolve_argv(["--t", "${HF_TOKEN}"], {"HF_TOKEN": "t"}) == ["--t", "t"]


def test_recipe_may_point_hf_token_at_another_variable() -> None:
    recipe = simple_recipe("vllm serve {model} --port {port}", env={"HF_TOKEN": "${MY_HF}"})
    plan = build_plan(recipe, apply_overrides(recipe, []), cluster(1))
    assert plan.ranks[0].env["HF_TOKEN"] == "${MY_HF}"
    assert resolve_secrets(plan.ranks[0].env, {"MY_HF": "t"})["HF_TOKEN"] == "t"


def test_human_summary_lists_each_rank_flag_by_flag() -> None:
    from spark_tui.commands.plan import summary

    recipe = find_recipe("glm-5.3-flash")
    text = summary(build_plan(recipe, apply_overrides(recipe, []), [head_node(), worker_node()]))
    assert "rank 1  spark-b  10.0.0.2 (cluster link 192.168.100.11)  worker" in text
    assert "\n    --node-rank 1\n    --headless\n" in text
    assert "HF_TOKEN=${HF_TOKEN}   (read from your shell at launch)" in text
    assert "NCCL_SOCKET_IFNAME=enP2p1s0f1np1" in text


def test_ray_nodes_carry_the_playbook_variables_and_no_dashboard_by_default() -> None:
    recipe = simple_recipe(
        "vllm serve {model} --port {port}",
        runtime="vllm-ray",
        defaults={"tensor_parallel": 2},
    )
    plan = build_plan(recipe, apply_overrides(recipe, []), [head_node(), worker_node()])
    for rank in plan.ranks:
        assert rank.env["RAY_memory_monitor_refresh_ms"] == "0"
        assert rank.env["MASTER_ADDR"] == HEAD_IP
        assert rank.container.env == rank.env
        assert rank.argv[-2:] == ["--disable-usage-stats", "--block"]
    assert "--include-dashboard=false" in plan.ranks[0].argv
    assert "dashboard_port" not in plan.rendezvous


def test_ray_dashboard_port_turns_the_dashboard_on_at_that_port() -> None:
    recipe = simple_recipe(
        "vllm serve {model} --port {port}",
        runtime="vllm-ray",
        defaults={"tensor_parallel": 2, "dashboard_port": 8266},
    )
    plan = build_plan(recipe, apply_overrides(recipe, []), [head_node(), worker_node()])
    head, worker = plan.ranks
    assert "--include-dashboard=true" in head.argv
    assert _flag(head.argv, "--dashboard-port") == "8266"
    assert "--dashboard-port" not in worker.argv
    assert plan.rendezvous["dashboard_port"] == 8266


def test_a_recipes_own_api_server_count_is_kept_and_its_dp_rank_spellings_replaced() -> None:
    recipe = simple_recipe("vllm serve {model} --port {port} -asc 2 -dpn 1 -dpr 7")
    plan = build_plan(recipe, apply_overrides(recipe, ["data_parallel=2"]), cluster(2))
    head, other = plan.ranks[0].argv, plan.ranks[1].argv
    assert _flag(head, "-asc") == "2" and "--api-server-count" not in head
    for argv in (head, other):
        assert "-dpn" not in argv and "--data-parallel-rank" not in argv
    assert "-dpr" not in head and "--data-parallel-start-rank" not in head
    assert _flag(other, "--data-parallel-start-rank") == "1" and "-dpr" not in other
    # vLLM refuses an API server count on a headless rank.
    assert "-asc" not in other and "--api-server-count" not in other

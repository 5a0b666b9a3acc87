"""Ranks that share one rendezvous but logged different world sizes never meet, and nothing
fails: a launch that ends at its ready timeout like that gets check's remedy for the layout
(a dense model's data-parallel replicas that span nodes), not the firewall advice."""

from __future__ import annotations

from pathlib import Path

from spark_tui.core.facts import GIB, Interface, NodeFacts
from spark_tui.core.launch_rules import rank_failure_remedy, world_size_mismatch_remedy
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import RankSpec, build_plan
from spark_tui.core.recipe import Recipe
from spark_tui.core.serve_rules import dense_replicas_hang, dense_replicas_remedy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _world(pid: int, size: int, rank: int, init: str) -> str:
    """A worker's world line in real vLLM 0.32's wording (as in the lab's real logs, e.g.
    vllm-0.32.0-cpu-tp2-head.log)."""
    return (
        f"(Worker pid={pid}) INFO 12-05 09:17:39 [parallel_state.py:1906] world_size={size} "
        f"rank={rank} local_rank=0 distributed_init_method={init} backend=gloo"
    )


def _ranks(n: int, *sets: str, names: str = "spark-{}", first: int = 0) -> list[RankSpec]:
    nodes = [
        NodeFacts(
            name=names.format(i + first),
            address=f"10.0.0.{i + 1}",
            memory_total_bytes=128 * GIB,
            interfaces=[
                Interface("enp1s0f0np0", "rocep1s0f0", "up", f"192.168.50.{i + 1}", 200000)
            ],
        )
        for i in range(n)
    ]
    recipe = Recipe(
        name="dense", model="org/dense", container="img:1",
        command="vllm serve {model} --port {port} --tensor-parallel-size {tensor_parallel}",
        defaults={"port": 8000, "tensor_parallel": 1},
    )  # fmt: skip
    return build_plan(recipe, apply_overrides(recipe, list(sets)), nodes).ranks


HEAD = "tcp://192.168.50.1:29501"


def real_dense_hybrid_worlds() -> dict[int, list[str]]:
    """Each rank's lines of real vLLM 0.32 on the lab's four nodes, the dense tiny model at
    TP 2 x DP 2 forced past check (it hung until the ready timeout)."""
    text = (FIXTURES / "vllm-0.32.0-cpu-dense-tp2-dp2-worlds.log").read_text()
    assert text.startswith("# source: real vLLM 0.32.0")
    logged: dict[int, list[str]] = {}
    for line in text.splitlines()[1:]:
        if line.startswith("# rank "):
            rank = int(line.split()[2])
            logged[rank] = []
        else:
            logged[rank].append(line)
    return logged


def test_the_real_hang_gets_the_remedy_naming_who_said_what() -> None:
    ranks = _ranks(4, "tensor_parallel=2", "data_parallel=2", names="spark-lab-{}", first=1)
    remedy = rank_failure_remedy([], ranks, never_met=True, logged=real_dense_hybrid_worlds())
    assert remedy == (
        "the ranks never met at the rendezvous tcp://10.77.117.11:29501: rank 0 on "
        "spark-lab-1 and rank 2 on spark-lab-3 said world_size=2, rank 1 on spark-lab-2 and "
        f"rank 3 on spark-lab-4 said world_size=4; {dense_replicas_hang(2, 1, 2)} "
        f"(`spark-tui check` refuses this layout); {dense_replicas_remedy(2, 1, 2)}"
    )


def test_a_dense_hybrid_launch_that_never_formed_names_who_said_what_and_checks_remedy() -> None:
    ranks = _ranks(4, "tensor_parallel=2", "data_parallel=2")
    # What vLLM 0.32 logs there: each replica's engine leader a world of TP x PP (2, rank 0),
    # the replicas' other nodes a world of TP x PP x DP (4), all at the head's rendezvous.
    logged = {
        0: ["(APIServer pid=1) INFO 12-05 09:17:16 [model.py:2152] Using max model len 2048",
            _world(47, 2, 0, HEAD)],
        1: [_world(20, 4, 1, HEAD)],
        2: [_world(35, 2, 0, HEAD)],
        3: [_world(21, 4, 3, HEAD)],
    }  # fmt: skip
    remedy = rank_failure_remedy([], ranks, never_met=True, logged=logged)
    assert remedy is not None
    assert remedy.startswith(
        f"the ranks never met at the rendezvous {HEAD}: rank 0 on spark-0 and rank 2 on "
        "spark-2 said world_size=2, rank 1 on spark-1 and rank 3 on spark-3 said world_size=4"
    ), remedy
    # check's own words and remedy for the layout, not the firewall advice.
    assert dense_replicas_hang(2, 1, 2) in remedy and remedy.endswith(
        dense_replicas_remedy(2, 1, 2)
    )
    assert "--set data_parallel=4" in remedy
    assert "firewall" not in remedy


def test_one_world_or_worlds_at_their_own_rendezvous_are_no_mismatch() -> None:
    ranks = _ranks(4, "tensor_parallel=2", "data_parallel=2")
    # A MoE model's replicas: one world of 4 at the head.
    one = {r: [_world(20 + r, 4, r, HEAD)] for r in range(4)}
    assert world_size_mismatch_remedy(one, ranks) is None
    # Replicas of one node each: a world of 1 each, every one at its own address.
    own = {r: [_world(20 + r, 1, 0, f"tcp://192.168.50.{r + 1}:4{r}001")] for r in range(4)}
    assert world_size_mismatch_remedy(own, _ranks(4, "data_parallel=4")) is None
    # A stuck worker with no world line falls through to the rendezvous remedy.
    remedy = rank_failure_remedy([], ranks, never_met=True, logged={0: [_world(47, 4, 0, HEAD)]})
    assert remedy is not None and "firewall" in remedy


def test_real_tensor_parallel_logs_of_one_world_are_no_mismatch() -> None:
    # The lab's real vLLM 0.32, TP 2 over two nodes: both workers world_size=2.
    logged = {}
    for rank, name in enumerate(("head", "worker")):
        logged[rank] = (FIXTURES / f"vllm-0.32.0-cpu-tp2-{name}.log").read_text().splitlines()
    assert any("world_size=2 rank=1 " in line for line in logged[1])
    assert world_size_mismatch_remedy(logged, _ranks(2, "tensor_parallel=2")) is None

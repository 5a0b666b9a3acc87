"""Four simulated ranks of TP 2 x DP 2 in the launch plan's form (one API on the head, the
other nodes headless, every node's --master-addr the head's): as real vLLM 0.32, a MoE
model's replicas form one world of 4 ranks and serve, while a dense model's never meet (each
replica's engine a world of 2, its other node a world of 4, at the same rendezvous) and
nothing fails."""

from __future__ import annotations

import re
import time
from pathlib import Path

from engine_harness import Engine, free_port, serve_argv
from world_lines import ranks_of, world_lines

WORLD = re.compile(r"\[parallel_state\.py:\d+\] world_size=(\d+) rank=(\d+) local_rank=0 ")
# Real vLLM 0.32 on the lab's four nodes, the dense tiny model at TP 2 x DP 2 in this form.
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32.0-cpu-dense-tp2-dp2-worlds.log"


def _real_worlds() -> list[tuple[int, int]]:
    """(world size, rank) each rank of the real launch logged, in rank order."""
    text = REAL.read_text()
    assert text.startswith("# source: real vLLM 0.32.0")
    return [(int(m.group(1)), int(m.group(2))) for m in WORLD.finditer(text)]


def _four(model: str) -> tuple[list[Engine], int, int]:
    """The four ranks (the head first), its API port and the rendezvous port."""
    api, master, rpc = free_port(), free_port(), free_port()
    engines = []
    for node in range(4):
        flags = [
            "--tensor-parallel-size", "2", "--max-model-len", "4096",
            "--nnodes", "4", "--node-rank", str(node),
            "--master-addr", "127.0.0.1", "--master-port", str(master),
            "--data-parallel-size", "2", "--data-parallel-size-local", "1",
            "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(rpc),
        ]  # fmt: skip
        if node:
            flags += ["--headless", "--data-parallel-start-rank", str(node // 2)]
        engines.append(Engine(serve_argv(model, api if node == 0 else free_port(), *flags)))
    return engines, api, master


def _worlds(engines: list[Engine]) -> list[tuple[int, int]]:
    """(world size, rank) each rank logged, waiting for the line."""
    found = []
    for e in engines:
        m = WORLD.search(e.wait_for_line("distributed_init_method=", timeout=60))
        assert m is not None
        found.append((int(m.group(1)), int(m.group(2))))
    return found


def test_a_dense_models_replicas_across_nodes_never_meet_and_say_nothing() -> None:
    engines, api, master = _four("Qwen/Qwen3-8B")
    try:
        # Real vLLM's numbers: the replica engines (node ranks 0 and 2) a world of TP x PP,
        # rank 0; their headless nodes TP x PP x DP, offset by their replica.
        assert _real_worlds() == [(2, 0), (4, 1), (2, 0), (4, 3)]
        assert _worlds(engines) == _real_worlds()
        # The second replica's engine leads a replica of its own (vLLM renumbers its node 0).
        assert "DP group leader: node_rank=0, node_rank_within_dp=0" in engines[2].output
        for e in engines:
            assert f"distributed_init_method=tcp://127.0.0.1:{master} " in e.output
        # Long past where the replicas would have met and served at this pace (the MoE test
        # below reaches ready in a few seconds): still waiting, with no error and no API.
        time.sleep(5)
        for e in engines:
            assert e.proc.poll() is None, e.output
            assert " ERROR " not in e.output and "Traceback" not in e.output, e.output
            assert "is assigned as DP rank" not in e.output, e.output
        assert "Application startup complete" not in engines[0].output
        # Every line the real ranks logged about their replica and world, said alike.
        real = ranks_of(REAL.read_text())
        assert [world_lines(r, head="10.77.117.11") for r in real] == [
            world_lines(e.output.splitlines(), head="127.0.0.1") for e in engines
        ]
    finally:
        for e in engines:
            e.stop()


def test_a_moe_models_replicas_across_nodes_form_one_world_and_serve() -> None:
    engines, api, _ = _four("Qwen/Qwen3-30B-A3B")
    try:
        # vLLM 0.32 on the lab (the tiny Qwen3-MoE, TP 2 x DP 2): every worker world_size=4,
        # ranks 0-3, and "rank 2 in world size 4 is assigned as DP rank 1".
        assert _worlds(engines) == [(4, 0), (4, 1), (4, 2), (4, 3)]
        engines[0].wait_healthy(api, timeout=60)
        for e in engines:
            e.wait_for_line("is assigned as DP rank")
        # What vLLM 0.32's source makes of the dense capture's layout for a MoE model: no
        # replica runs alone (reconfigure_for_independent_dp_rank is for dense models), so each
        # replica leader keeps its deployment-wide node rank and every rank its place in the
        # one world, its EP rank that place (the EP group is every DP x TP rank).
        expected = []
        for r in range(4):
            lines = [
                f"({'MainProcess' if r else 'APIServer'}) [arg_utils.py:2472] Inferred "
                f"data_parallel_rank {r // 2} from node_rank {r}"
            ]
            if r == 2:
                lines.append(
                    "(MainProcess) [serve.py:239] Launching 1 data parallel engine(s) in "
                    "headless mode, with head node address tcp://ADDRESS:PORT."
                )
            if r % 2 == 0:
                lines.append(
                    f"(EngineCore_DP{r // 2}) [multiproc_executor.py:153] DP group leader: "
                    f"node_rank={r}, node_rank_within_dp=0, master_addr=HEAD, "
                    "mq_connect_ip=OWN (local), world_size=2, local_world_size=1"
                )
            lines += [
                f"(Worker) [parallel_state.py:1906] world_size=4 rank={r} local_rank=0 "
                "distributed_init_method=tcp://ADDRESS:PORT backend=nccl",
                f"(Worker) [parallel_state.py:2350] rank {r} in world size 4 is assigned as DP "
                f"rank {r // 2}, PP rank 0, PCP rank 0, TP rank {r % 2}, ETP rank {r % 2}, "
                f"EP rank {r}, EPLB rank N/A",
            ]
            expected.append(lines)
        assert [world_lines(e.output.splitlines(), head="127.0.0.1") for e in engines] == expected
        # Past its place in the world each rank's worker is named for it, as vLLM does.
        assert "(Worker_DP1_TP0 pid=" in engines[2].output
    finally:
        for e in engines:
            e.stop()

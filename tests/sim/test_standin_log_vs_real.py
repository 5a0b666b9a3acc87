"""The stand-in's startup log and /version held against real vLLM 0.32.0's (the head log of a
TP 2 lab launch, tests/fixtures/vllm-0.32.0-cpu-tp2-head.log): the version it prints, and for
every message both print, the same source location and the same wording. The stand-in marks
itself simulated with a local version label (`0.32.0+sparktui.sim`), nothing else. And a MoE
model's DP 2 ranks' lines about their torch world, against both ranks' logs of a real DP 2
launch (tests/fixtures/vllm-0.32.0-cpu-moe-dp2-*.log)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from engine_harness import Engine, free_port
from world_lines import endpoints, world_lines

from spark_tui.sim.engine import RELEASE, VERSION

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL_LOG = FIXTURES / "vllm-0.32.0-cpu-tp2-head.log"
# Real vLLM 0.32.0 (CPU build), a MoE model at DP 2 x TP 1 on two nodes in the launch plan's
# form: the head's log and the headless replica's.
REAL_DP2 = [FIXTURES / f"vllm-0.32.0-cpu-moe-dp2-{role}.log" for role in ("head", "worker")]
LINE = re.compile(r"^\((\w+)[^)]*\) (\w+) \S+ \S+ \[([^\]]+)\] (.*)$")
# Where the CPU build and the GPU build (which the stand-in simulates) log from different
# files, or print device-specific words.
DEVICE_SPECIFIC = {"Starting to load model", "Model loading took"}
# Messages made of the run's own values (the arguments, the engine's config, the model).
VALUES = {
    "non-default args: {'model_tag':",
    "Initializing a VN LLM",
    "Resolved architecture: QwenNForCausalLM",
    "▄▄ ▄█ █ █",  # the banner's version (compared above) and model lines
    "█▄█▀ █ █ █",
}


def _words(message: str) -> str:
    # Numbers, paths, quoted values and the collective backend (nccl on GPUs, gloo on CPUs).
    return re.sub(r"[\d.,]+|/\S+|'[^']*'|backend=\w+", "N", message)


def _messages(lines: list[str]) -> dict[str, tuple[str, str]]:
    """First words of each message (numbers and paths blanked) -> (source, message)."""
    out: dict[str, tuple[str, str]] = {}
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        _proc, _level, src, msg = m.groups()
        key = " ".join(re.sub(r"[\d.,]+|/\S+", "N", msg).split()[:4])
        out.setdefault(key, (src, msg))
    return out


def _stand_in_log() -> tuple[list[str], dict[str, object]]:
    port = free_port()
    engine = Engine(
        ["serve", "Qwen/Qwen3-0.6B", "--host", "127.0.0.1", "--port", str(port)]
        + ["--max-model-len", "2048", "--dtype", "float32", "--enforce-eager"]
        + ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    )
    try:
        engine.wait_healthy(port, timeout=60)
        version = httpx.get(f"http://127.0.0.1:{port}/version", timeout=10).json()
        chat = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": "hi"}]}
            | {"max_tokens": 4},
            timeout=30,
        ).json()
    finally:
        engine.stop()
    return engine.output.splitlines(), {"version": version, "chat": chat}


def test_the_stand_in_says_real_vllms_version_and_logs_its_lines() -> None:
    real_lines = REAL_LOG.read_text().splitlines()
    assert real_lines[0].startswith("# source: real vLLM 0.32.0")
    assert any(line.endswith(f"version {RELEASE}") for line in real_lines)
    sim_lines, api = _stand_in_log()
    assert VERSION == f"{RELEASE}+sparktui.sim"
    assert api["version"] == {"version": VERSION}
    fingerprint = api["chat"]["system_fingerprint"]  # type: ignore[index]
    assert re.fullmatch(rf"vllm-{re.escape(VERSION)}-[0-9a-f]{{8}}", fingerprint), fingerprint
    assert any(line.endswith(f"version {VERSION}") for line in sim_lines)
    assert any(f"Initializing a V1 LLM engine (v{VERSION})" in line for line in sim_lines)
    # No older release named as the running one (real vLLM's own wording may cite an older
    # release, "default since v0.21.0", and a rate can contain its digits, "20.28it/s").
    old_release = re.compile(r"(?:version |\(v|vllm-)0\.(?!32\.)\d+\.\d+")
    assert not [line for line in sim_lines if old_release.search(line)]

    real, sim = _messages(real_lines[1:]), _messages(sim_lines)
    shared = set(real) & set(sim)
    assert len(shared) >= 20, sorted(sim)
    problems = []
    for key in sorted(shared):
        (real_src, real_msg), (sim_src, sim_msg) = real[key], sim[key]
        if any(key.startswith(d) for d in DEVICE_SPECIFIC):
            continue
        if real_src != sim_src:
            problems.append(f"{key!r}: logged from {sim_src}, real vLLM {real_src}")
        if key not in VALUES and _words(real_msg) != _words(sim_msg):
            problems.append(f"{key!r}: says {sim_msg!r}, real vLLM {real_msg!r}")
    # The KV cache line: one line with the size and the concurrency (the device differs).
    real_kv = next(msg for _src, msg in real.values() if re.match(r"[A-Z]+ KV cache size", msg))
    sim_kv = next(msg for _src, msg in sim.values() if re.match(r"[A-Z]+ KV cache size", msg))
    if re.sub(r"[\d.,]+", "N", real_kv)[1:] != re.sub(r"[\d.,]+", "N", sim_kv)[1:]:
        problems.append(f"KV cache line {sim_kv!r} vs real {real_kv!r}")
    real_api = [m for _src, m in real.values() if m.startswith("Starting vLLM")]
    sim_api = [m for _src, m in sim.values() if m.startswith("Starting vLLM")]
    if [m.split(" on ")[0] for m in real_api] != [m.split(" on ")[0] for m in sim_api]:
        problems.append(f"API start line {sim_api} vs real {real_api}")
    assert not problems, "\n".join(problems)


def test_the_fingerprint_names_the_layout_as_real_vllm_does() -> None:
    from types import SimpleNamespace

    from spark_tui.sim.engine.api import fingerprint

    # Real vLLM 0.32 on the lab's TP 2 answered "vllm-0.32.0-tp2-1770f872".
    tp2 = fingerprint(SimpleNamespace(tensor_parallel_size=2, data_parallel_size=1))
    assert re.fullmatch(rf"vllm-{re.escape(VERSION)}-tp2-[0-9a-f]{{8}}", tp2), tp2
    many = fingerprint(
        SimpleNamespace(
            tensor_parallel_size=2,
            pipeline_parallel_size=2,
            data_parallel_size=2,
            enable_expert_parallel=True,
        )
    )
    assert "-tp2-pp2-dp2-ep-" in many


def _stand_in_dp2() -> list[list[str]]:
    """The two ranks' output of a MoE model at DP 2 x TP 1 in the launch plan's form: one API
    on the head, the other replica headless with its start rank, both pointed at the head's
    DP address (no --nnodes: each replica is one node)."""
    api, rpc = free_port(), free_port()
    dp = ["--data-parallel-size", "2", "--data-parallel-size-local", "1"]
    dp += ["--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(rpc)]
    common = ["--max-model-len", "2048", "--dtype", "float32", "--enforce-eager", *dp]
    model = "Qwen/Qwen3-30B-A3B"
    head = Engine(["serve", model, "--port", str(api), "--api-server-count", "1", *common])
    other = Engine(
        ["serve", model, "--port", str(free_port()), *common]
        + ["--headless", "--data-parallel-start-rank", "1"]
    )
    try:
        head.wait_healthy(api, timeout=90)
        other.wait_for_line("is assigned as DP rank", timeout=60)
    finally:
        for engine in (head, other):
            engine.stop()
    return [head.output.splitlines(), other.output.splitlines()]


def test_a_moe_models_dp_ranks_log_the_world_real_vllm_logs() -> None:
    real = []
    for path in REAL_DP2:
        lines = path.read_text().splitlines()
        assert lines[0].startswith("# source: real vLLM 0.32.0")
        real.append(lines[1:])
    # What the real ranks said: one world of both replicas' ranks (each replica's executor a
    # world of its own TP x PP), EP ranks by DP rank, met at the DP head's address.
    assert [world_lines(lines) for lines in real] == [
        [
            "(EngineCore_DP0) [multiproc_executor.py:153] DP group leader: node_rank=0, "
            "node_rank_within_dp=0, master_addr=127.0.0.1, mq_connect_ip=OWN (local), "
            "world_size=1, local_world_size=1",
            "(Worker) [parallel_state.py:1906] world_size=2 rank=0 local_rank=0 "
            "distributed_init_method=tcp://ADDRESS:PORT backend=nccl",
            "(Worker) [parallel_state.py:2350] rank 0 in world size 2 is assigned as DP rank 0, "
            "PP rank 0, PCP rank 0, TP rank 0, ETP rank 0, EP rank 0, EPLB rank N/A",
        ],
        [
            "(MainProcess) [serve.py:239] Launching 1 data parallel engine(s) in headless mode, "
            "with head node address tcp://ADDRESS:PORT.",
            "(EngineCore_DP1) [multiproc_executor.py:153] DP group leader: node_rank=0, "
            "node_rank_within_dp=0, master_addr=127.0.0.1, mq_connect_ip=OWN (local), "
            "world_size=1, local_world_size=1",
            "(Worker) [parallel_state.py:1906] world_size=2 rank=1 local_rank=0 "
            "distributed_init_method=tcp://ADDRESS:PORT backend=nccl",
            "(Worker) [parallel_state.py:2350] rank 1 in world size 2 is assigned as DP rank 1, "
            "PP rank 0, PCP rank 0, TP rank 0, ETP rank 0, EP rank 1, EPLB rank N/A",
        ],
    ]
    sim = _stand_in_dp2()
    assert [world_lines(lines) for lines in sim] == [world_lines(lines) for lines in real]
    # Both ranks meet at the DP head's address (the one the headless replica's handshake
    # names), on one port that is not the handshake's.
    for head, other in (real, sim):
        handshake = endpoints(other)["serve.py:239"]
        world = endpoints(other)["parallel_state.py:1906"]
        assert endpoints(head)["parallel_state.py:1906"] == world
        assert world[0] == handshake[0] and world[1] != handshake[1]

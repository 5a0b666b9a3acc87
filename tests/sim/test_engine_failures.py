"""The simulated engine fails where vLLM fails, with vLLM's messages and a non-zero exit."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from engine_harness import Engine, free_port, recipe_argv, serve_argv

GB64 = {"SPARK_SIM_MEM_TOTAL_BYTES": "64000000000"}


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    engine = Engine(argv, env)
    try:
        return engine.wait_exit(20), engine.output
    finally:
        engine.stop()


def test_unknown_flag_exits_2_with_argparse_wording() -> None:
    rc, out = run(["serve", "openai/gpt-oss-120b", "--no-such-flag", "3"])
    assert rc == 2
    assert out.startswith("usage: vllm [-h] [-v]")
    assert "{chat,complete,serve,launch,bench,collect-env,run-batch} ..." in out
    assert out.rstrip().endswith("vllm: error: unrecognized arguments: --no-such-flag 3")


def test_tp3_fails_with_the_heads_message() -> None:
    argv, env = recipe_argv("glm-5.3-flash", host="127.0.0.1", port=free_port(), tensor_parallel=3)
    rdv = ["--nnodes", "3", "--node-rank", "0", "--master-port", str(free_port())]
    rc, out = run(argv + rdv, env)
    assert rc == 1
    assert (
        "Value error, Total number of attention heads (64) must be divisible by tensor "
        "parallel size (3)." in out
    )
    assert "Traceback (most recent call last):" in out


def test_64gb_nodes_cannot_hold_the_128gb_recipe() -> None:
    """Both ranks of glm-5.3-flash on 64 GB nodes: the weights do not fit."""
    port, master = free_port(), free_port()
    argv, env = recipe_argv("glm-5.3-flash", host="127.0.0.1", port=port)
    rdv = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(master)]
    head = Engine(argv + rdv + ["--node-rank", "0"], {**env, **GB64})
    worker = Engine(argv + rdv + ["--node-rank", "1", "--headless"], {**env, **GB64})
    try:
        assert head.wait_exit(20) == 1
        assert worker.wait_exit(20) == 1
    finally:
        head.stop()
        worker.stop()
    for out in (head.output, worker.output):
        assert "torch.OutOfMemoryError: CUDA out of memory." in out
        assert "GPU 0 has a total capacity of 60.63 GiB" in out
    assert "Engine core initialization failed" in head.output


def test_a_slower_rank_still_reports_its_own_out_of_memory_error() -> None:
    """The head runs out of memory while the worker is still loading: the worker reads its own
    shards with no collective in between, so it too fails on memory, not on the lost head."""
    port, master = free_port(), free_port()
    argv, env = recipe_argv("glm-5.3-flash", host="127.0.0.1", port=port)
    rdv = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(master)]
    head = Engine(argv + rdv + ["--node-rank", "0"], {**env, **GB64})
    slow = {**env, **GB64, "SPARK_SIM_PACE": "0.5"}
    worker = Engine(argv + rdv + ["--node-rank", "1", "--headless"], slow)
    try:
        assert head.wait_exit(20) == 1
        assert worker.wait_exit(30) == 1
    finally:
        head.stop()
        worker.stop()
    assert "torch.OutOfMemoryError: CUDA out of memory." in head.output
    assert "torch.OutOfMemoryError: CUDA out of memory." in worker.output
    assert "NCCL error" not in worker.output


def test_page_cache_below_utilisation_fails_the_startup_check() -> None:
    env = {"SPARK_SIM_PAGE_CACHE_BYTES": "40000000000"}
    rc, out = run(
        serve_argv("openai/gpt-oss-120b", free_port(), "--gpu-memory-utilization", "0.9"), env
    )
    assert rc == 1
    assert (
        "ValueError: Free memory on device cuda:0 (79.44/121.69 GiB) on startup is less than "
        "desired GPU memory utilization (0.9, 109.52 GiB). Decrease GPU memory utilization or "
        "reduce GPU memory used by other processes." in out
    )


def test_kv_cache_too_small_for_one_max_length_request() -> None:
    argv = serve_argv("openai/gpt-oss-120b", free_port(), "--kv-cache-memory-bytes", "1G")
    rc, out = run(argv)
    assert rc == 1
    assert "Available KV cache memory: 1.0 GiB" in out
    assert (
        "ValueError: To serve at least one request with the models's max seq len (131072), "
        "(4.5 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(1.0 GiB). Based on the available memory, the estimated maximum model length is " in out
    )
    assert "Try increasing `gpu_memory_utilization` or decreasing `max_model_len`" in out


def test_no_memory_left_for_cache_blocks() -> None:
    rc, out = run(serve_argv("openai/gpt-oss-120b", free_port(), "--gpu-memory-utilization", "0.5"))
    assert rc == 1
    assert "Available KV cache memory: -" in out
    assert "ValueError: No available memory for the cache blocks." in out


def test_api_port_in_use() -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen(1)
        rc, out = run(serve_argv("openai/gpt-oss-120b", port))
    assert rc == 1
    assert out.rstrip().endswith("OSError: [Errno 98] Address already in use")
    # Frame for frame what real vLLM 0.32.0 printed here (its install path aside).
    assert _frames(out) == _frames(REAL_PORT_IN_USE.read_text())


REAL_PORT_IN_USE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32.0-port-in-use.txt"
_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)$')


def _frames(text: str) -> list[tuple[str, int, str, str]]:
    """(path below site-packages, line, function, code) of each traceback frame; the
    interpreter's own files by name only (where Python lives differs)."""
    lines = text.splitlines()
    start = lines.index("Traceback (most recent call last):")
    out = []
    for i, line in enumerate(lines[start:], start):
        m = _FRAME.match(line)
        if m is None:
            continue
        path = m["path"]
        for cut in (
            "site-packages/",
            "dist-packages/",
            "/bin/",
            "lib/python3.11/",
            "lib/python3.12/",
        ):
            if cut in path:
                path = path.rsplit(cut, 1)[1]
                break
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        code = nxt.strip() if nxt.startswith("    ") and not _FRAME.match(nxt) else ""
        out.append((path, int(m["line"]), m["func"], code))
    assert out, "no frames"
    return out


def test_rendezvous_timeouts_on_both_sides() -> None:
    env = {"SPARK_SIM_RENDEZVOUS_TIMEOUT_S": "1"}
    master = free_port()
    tp2 = ["-tp", "2", "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(master)]
    worker = Engine(
        serve_argv("openai/gpt-oss-120b", free_port(), *tp2, "--node-rank", "1", "--headless"), env
    )
    head = Engine(
        serve_argv("openai/gpt-oss-120b", free_port(), *tp2, "--master-port", str(free_port())), env
    )
    try:
        assert worker.wait_exit(20) == 1
        assert head.wait_exit(20) == 1
    finally:
        worker.stop()
        head.stop()
    assert (
        "[c10d] The client socket cannot be initialized to connect to [127.0.0.1]" in worker.output
    )
    assert (
        "torch.distributed.DistNetworkError: The client socket has timed out after 1000ms "
        f"while trying to connect to (127.0.0.1, {master})." in worker.output
    )
    assert (
        "torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 1/2 clients joined."
        in head.output
    )


def test_mismatched_rank_is_rejected() -> None:
    master = free_port()
    rdv = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(master)]
    env = {"SPARK_SIM_RENDEZVOUS_TIMEOUT_S": "1.5"}
    head = Engine(serve_argv("openai/gpt-oss-120b", free_port(), "-tp", "2", *rdv), env)
    worker = Engine(
        serve_argv(
            "Qwen/Qwen3-32B", free_port(), "-tp", "2", *rdv, "--node-rank", "1", "--headless"
        ),
        env,
    )
    try:
        assert worker.wait_exit(20) == 1
        assert head.wait_exit(20) == 1
    finally:
        worker.stop()
        head.stop()
    assert "rejected rank 1: model='Qwen/Qwen3-32B' (head: 'openai/gpt-oss-120b')" in worker.output


def test_unknown_and_gated_models() -> None:
    rc, out = run(serve_argv("example/not-a-model", free_port()))
    assert rc == 1
    assert (
        "ValueError: Invalid repository ID or local directory specified: 'example/not-a-model'."
        in out
    )
    rc, out = run(serve_argv("meta-llama/Llama-3.3-70B-Instruct", free_port()))
    assert rc == 1
    assert "OSError: You are trying to access a gated repo." in out
    assert (
        "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct/resolve/main/config.json."
        in out
    )


def test_tp2_on_one_node_needs_nnodes() -> None:
    rc, out = run(serve_argv("openai/gpt-oss-120b", free_port(), "-tp", "2"))
    assert rc == 1
    assert (
        "ValueError: World size (2) is larger than the number of available GPUs (1) in this node."
        in out
    )


def test_more_sequences_than_the_step_budget_is_refused_as_vllm_does() -> None:
    """vLLM 0.32's SchedulerConfig: max_num_batched_tokens must be >= max_num_seqs."""
    rc, out = run(serve_argv("openai/gpt-oss-120b", free_port(), "--max-num-seqs", "10000"))
    assert rc == 1 and "Traceback (most recent call last):" in out
    assert (
        "Value error, max_num_batched_tokens (8192) must be greater than or equal to "
        "max_num_seqs (10000)." in out
    )
    flags = ["--max-num-seqs", "512", "--max-num-batched-tokens", "256"]
    out = run(serve_argv("openai/gpt-oss-120b", free_port(), *flags))[1]
    assert "max_num_batched_tokens (256) must be" in out


def test_a_budget_below_the_default_sequences_lowers_them_as_vllm_does() -> None:
    """Only --max-num-batched-tokens given, below the 256 sequences vLLM defaults to: vLLM
    0.32 lowers max_num_seqs to the budget (engine/arg_utils.py) and starts."""
    port = free_port()
    flags = ["--max-model-len", "4096", "--max-num-batched-tokens", "128"]
    engine = Engine(serve_argv("Qwen/Qwen3-8B", port, *flags))
    try:
        engine.wait_healthy(port)
    finally:
        engine.stop()
    assert "Chunked prefill is enabled with max_num_batched_tokens=128." in engine.output
    assert "must be greater than or equal" not in engine.output

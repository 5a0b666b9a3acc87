"""Log-line classification on every real vLLM log and failure sample in tests/fixtures
(copies of the shared reference folder; each file's first line names its source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui.core.logclass import (
    KINDS,
    LineClass,
    StreamClassifier,
    classify,
    clean,
    explain_failure,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def lines_of(name: str) -> list[str]:
    text = (FIXTURES / name).read_text(encoding="utf-8", errors="replace")
    return text.splitlines()[1:]  # the first line names the source


def kinds(lines: list[str]) -> list[LineClass]:
    stream = StreamClassifier()
    return [stream.classify(line) for line in lines]


# What each failure sample must be explained by (a phrase of vLLM's or NCCL's own wording).
FAILURES = {
    "vllm_fail_cuda_oom_startup_h100.txt": "torch.OutOfMemoryError: CUDA out of memory",
    "vllm_fail_free_memory_less_than_util_ci.txt": "(1.53/22.05 GiB) on startup is less than desired",
    "vllm_fail_free_memory_less_than_util_gb10.txt": "desired GPU memory utilization (0.7, 85.18 GiB)",
    "vllm_fail_free_memory_less_than_util_traceback.txt": "ValueError: Free memory on device cuda:0",
    "vllm_fail_gated_repo_401.txt": "Cannot access gated repo",
    "vllm_fail_gated_repo_401_hfhub_old.txt": "GatedRepoError: 401 Client Error",
    "vllm_fail_kv_cache_gptoss120b_h100.txt": "EngineCore failed to start.",
    "vllm_fail_kv_cache_gptoss120b_h100_valueerror.txt": "(4.54 GiB KV cache is needed",
    "vllm_fail_kv_cache_max_seq_len.txt": "(24.0 GiB KV cache is needed",
    "vllm_fail_kv_cache_max_seq_len_tpu.txt": "(16.00 GiB KV cache is needed",
    "vllm_fail_nccl_ibv_modify_qp_no_such_device.txt": "NCCL WARN Call to ibv_modify_qp failed",
    "vllm_fail_nccl_ibv_modify_qp_timeout.txt": "failed with 110 Connection timed out",
    "vllm_fail_nccl_watchdog_timeout_ray.txt": "Watchdog caught collective operation timeout",
    "vllm_fail_no_available_memory_cache_blocks.log": "No available memory for the cache blocks",
    "vllm_fail_port_in_use.txt": "OSError: [Errno 98] Address already in use",
    "vllm_fail_port_in_use_torch_store.txt": "EADDRINUSE",
    "vllm_fail_ray_worker_died_spark_ring.txt": "RayWorkerProc rank=[2] died unexpectedly",
    "vllm_fail_tp_attention_heads.txt": "must be divisible by tensor parallel size (3)",
    "vllm_fail_tp_attention_heads_classic.txt": "(52) must be divisible by tensor parallel size (8)",
    "spark_fail_nvrm_no_memory_dmesg.txt": "NV_ERR_NO_MEMORY",
}


def test_every_failure_fixture_is_covered() -> None:
    present = {p.name for p in FIXTURES.glob("vllm_fail_*")} | {
        p.name for p in FIXTURES.glob("spark_fail_*")
    }
    assert present == set(FAILURES)


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failures_are_errors_and_explained_briefly(name: str) -> None:
    lines = lines_of(name)
    classes = kinds(lines)
    assert any(c.kind == "error" for c in classes)
    explanation = explain_failure(lines)
    assert 1 <= len(explanation) <= 6
    assert any(FAILURES[name] in line for line in explanation), explanation
    for line in explanation:
        assert 'File "' not in line and "Traceback (most recent call last)" not in line
        assert "^^^" not in line and "\x1b" not in line and "^[[" not in line


def test_a_long_traceback_is_explained_by_its_cause_not_its_frames() -> None:
    lines = lines_of("vllm_fail_no_available_memory_cache_blocks.log")
    explanation = explain_failure(lines)
    # The root cause once (vLLM logs it twice: as ERROR and in the raw traceback).
    assert sum("No available memory for the cache blocks" in line for line in explanation) == 1
    assert len(explanation) <= 3
    assert explain_failure(lines, max_lines=1) == [
        next(line for line in explanation if "No available memory" in line)
    ]


def test_wrapped_exception_message_is_kept_whole() -> None:
    explanation = explain_failure(lines_of("vllm_fail_free_memory_less_than_util_gb10.txt"))
    assert explanation == [
        "ValueError: Free memory on device cuda:0 (67.92/121.69 GiB) on startup is less than",
        "desired GPU memory utilization (0.7, 85.18 GiB).",
    ]


STARTUPS = [
    "vllm_startup_gb10_gemma4_12b.log",
    "vllm_startup_gb10_gemma4_26b_single_node.log",
    "vllm_startup_gb10_gemma4_31b_fp8kv_cold.log",
    "vllm_startup_gb10_qwen36_dflash_specdec.log",
    "vllm_multinode_tp2_head_rank0.log",
]


@pytest.mark.parametrize("name", STARTUPS)
def test_healthy_startups_have_no_errors_and_reach_ready(name: str) -> None:
    lines = lines_of(name)
    classes = kinds(lines)
    errors = [line for line, c in zip(lines, classes, strict=True) if c.kind == "error"]
    assert errors == []
    assert explain_failure(lines) == []
    assert any(c.kind == "ready" and c.scope == "api" for c in classes)
    phases = {c.scope for c in classes if c.kind == "phase"}
    assert {"weights_loaded", "kv_cache", "cuda_graphs", "api_starting"} <= phases
    weights = [c.progress for c in classes if c.kind == "progress" and c.scope == "weights"]
    assert weights and weights[-1] == 1.0
    assert all(c.kind in KINDS for c in classes)
    # Ready comes after the weights are loaded.
    first_ready = next(i for i, c in enumerate(classes) if c.kind == "ready" and c.scope == "api")
    loaded = next(i for i, c in enumerate(classes) if c.scope == "weights_loaded")
    assert loaded < first_ready


def test_headless_worker_log() -> None:
    lines = lines_of("vllm_multinode_tp2_worker_rank1_headless.log")
    classes = kinds(lines)
    assert not any(c.kind == "error" for c in classes)
    ready = [i for i, c in enumerate(classes) if c.kind == "ready"]
    assert len(ready) == 1 and classes[ready[0]].scope == "worker"
    assert "Kernel JIT monitor activated" in lines[ready[0]]
    at = {c.scope: i for i, c in reversed(list(enumerate(classes))) if c.kind == "phase"}
    # Milestones in startup order, the worker's ready line after all of them.
    assert at["distributed_init"] < at["weights_loaded"] < at["kv_cache"] < ready[0]
    assert at["cuda_graphs"] < ready[0]


def test_other_samples_classify_without_errors() -> None:
    for name in (
        "vllm_warn_ray_tp_exceeds_gpus_spark.txt",
        "vllm_nccl_init_spark_mp_excerpt.log",
        "vllm_nccl_ray_spark_channels_excerpt.log",
        "vllm_startup_spark_hang_routes_excerpt.log",
        "vllm_startup_spark_launch_cluster_ray_excerpt.log",
        "vllm_startup_spark_ray_nv2603_excerpt.log",
    ):
        classes = kinds(lines_of(name))
        assert not any(c.kind == "error" for c in classes), name
    warn = kinds(lines_of("vllm_warn_ray_tp_exceeds_gpus_spark.txt"))
    assert warn[0].kind == "warning"


@pytest.mark.parametrize(
    ("line", "kind", "progress", "scope"),
    [
        (
            "(Worker_TP0_EP0 pid=189) Loading safetensors checkpoint shards:  45% Completed "
            "| 27/60 [03:13<04:11, 41.86s/it]",
            "progress",
            0.45,
            "weights",
        ),
        (
            "Capturing CUDA graphs (FULL):   0%|          | 0/2 [00:00<?, ?it/s]"
            "Capturing CUDA graphs (FULL):  50%|#####     | 1/2 [00:00<00:00,  2.49it/s]",
            "progress",
            0.5,
            "cuda_graphs",
        ),
        ("(APIServer pid=74) INFO:     Application startup complete.", "ready", None, "api"),
        (
            "(Worker pid=189) INFO 09-09 15:20:45 [pynccl.py:120] vLLM is using nccl==2.30.7",
            "phase",
            None,
            "nccl",
        ),
        (
            "(Worker_TP0_EP0 pid=189) INFO 09-09 15:30:58 [model_runner.py:408] Model loading "
            "took 63.13 GiB memory and 608.728886 seconds",
            "phase",
            None,
            "weights_loaded",
        ),
        (
            "(EngineCore pid=164) INFO 09-09 15:31:26 [kv_cache_utils.py:2331] GPU KV cache "
            "size: 2,318,574 tokens, Maximum concurrency for 262,144 tokens per request: 8.84x",
            "phase",
            None,
            "kv_cache",
        ),
        (
            '(APIServer pid=74) INFO:     127.0.0.1:51002 - "GET /metrics HTTP/1.1" 200 OK',
            "debug",
            None,
            None,
        ),
        (
            "(Worker_TP0_EP0 pid=189) INFO 09-09 15:31:51 [gpu_worker.py:867] Free memory on "
            "device (108.18/121.69 GiB) on startup. Desired GPU memory utilization is "
            "(0.7, 85.18 GiB).",
            "phase",
            None,
            "memory_profile",
        ),
        (
            "(EngineCore pid=3931) INFO 06-12 12:49:02 [gpu_worker.py:480] Available KV cache "
            "memory: -1.36 GiB",
            "warning",
            None,
            None,
        ),
        (
            "(EngineCore pid=173) WARNING 06-11 21:45:54 [import_utils.py:408] Traceback "
            "(most recent call last):",
            "warning",
            None,
            None,
        ),
        ("Traceback (most recent call last):", "error", None, None),
        ("(APIServer pid=1) INFO 06-07 15:33:19 [api_server.py:581] hello", "info", None, None),
        ("(EngineCore pid=1) DEBUG 06-07 15:33:19 [x.py:1] detail", "debug", None, None),
    ],
)
def test_single_lines(line: str, kind: str, progress: float | None, scope: str | None) -> None:
    c = classify(line)
    assert c.kind == kind
    if progress is not None:
        assert c.progress == pytest.approx(progress)
    if scope is not None:
        assert c.scope == scope


def test_error_wording_of_the_brief() -> None:
    for line in (
        "RuntimeError: NCCL error in: ../csrc/distributed.cpp:100",
        "ValueError: Free memory on device cuda:0 (1.0/121.69 GiB) on startup is less than",
        "spark-a:1:2 [0] NCCL WARN NET/IB : Got completion with error 12",
        "(EngineCore pid=1) ERROR 01-01 00:00:00 [core.py:1] EngineCore failed to start.",
        "Value error, Total number of attention heads (64) must be divisible by tensor parallel "
        "size (3).",
        "OSError: [Errno 98] Address already in use",
    ):
        assert classify(line).kind == "error", line


def test_ansi_colours_are_removed() -> None:
    raw = "\x1b[0;36m(EngineCore pid=1)\x1b[0;0m \x1b[31mERROR\x1b[0m x"
    assert clean(raw) == "(EngineCore pid=1) ERROR x"
    assert classify(raw).kind == "error"


def test_stream_classifier_marks_bare_traceback_source_lines() -> None:
    stream = StreamClassifier()
    lines = [
        "(APIServer pid=3) Traceback (most recent call last):",
        '(APIServer pid=3)   File "/x/vllm/entrypoints/cli/main.py", line 95, in main',
        "(APIServer pid=3)     args.dispatch_function(args)",
        "(EngineCore pid=4) INFO 06-12 12:49:03 [x.py:1] interleaved engine line",
        "(APIServer pid=3)              ^^^^^^",
        "(APIServer pid=3) RuntimeError: Engine core initialization failed.",
        "(APIServer pid=3) INFO:     Shutting down",
    ]
    assert [stream.classify(line).kind for line in lines] == [
        "error",
        "error",
        "error",
        "info",
        "error",
        "error",
        "info",
    ]
    # Stateless classification cannot know a source line is part of a traceback.
    assert classify(lines[2]).kind == "info"


def test_warning_level_traceback_is_not_a_failure() -> None:
    lines = lines_of("vllm_startup_gb10_gemma4_31b_fp8kv_cold.log")
    classes = kinds(lines)
    imports = [c for line, c in zip(lines, classes, strict=True) if "import_utils.py" in line]
    assert imports and all(c.kind == "warning" for c in imports)

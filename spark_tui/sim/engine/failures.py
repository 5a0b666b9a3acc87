"""vLLM's failure messages and traceback shapes (compare shared/reference/vllm_fail_*).

A `Failure` carries the final exception line and the frames leading to it; `report()` prints
it where the real failure shows up: an API-server config error as a raw traceback, an engine
core error as logged ERROR lines + the API server's "Engine core initialization failed", a
headless worker's error as the worker's own traceback. Every failure exits non-zero.
"""

from __future__ import annotations

from spark_tui.sim.engine.logs import Channel, torch_stamp

SITE = "/usr/local/lib/python3.12/dist-packages"
Frame = tuple[str, int, str, str]

DOCS_MEMORY = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"


class Failure(Exception):
    """A startup or runtime failure, printed in vLLM's shape, with the process exit code."""

    def __init__(
        self,
        exc_line: str,
        frames: list[Frame],
        stage: str,
        exit_code: int = 1,
        log_source: str = "core.py:1199",
        prefixed: bool = True,
    ) -> None:
        super().__init__(exc_line)
        # Whether the process's output prefix is on its traceback: vLLM decorates stdout and
        # stderr only once the server is set up, so what fails before prints bare lines.
        self.prefixed = prefixed
        self.exc_line = exc_line
        self.frames = frames
        self.stage = stage  # "config" (API server), "engine" (engine core / worker), "runtime"
        self.exit_code = exit_code
        self.log_source = log_source


def _f(path: str, line: int, func: str, code: str) -> Frame:
    return (f"{SITE}/{path}", line, func, code)


def traceback_lines(frames: list[Frame], exc_line: str) -> list[str]:
    """`Traceback (most recent call last):` + frames + the exception line(s)."""
    out = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        out.append(f'  File "{path}", line {line}, in {func}')
        if code:
            out.append(f"    {code}")
    out.extend(exc_line.split("\n"))
    return out


CLI_FRAMES = [  # as vLLM 0.32.0 prints them (tests/fixtures/vllm-0.32.0-port-in-use.txt)
    ("/usr/local/bin/vllm", 8, "<module>", "sys.exit(main())"),
    _f("vllm/entrypoints/cli/main.py", 120, "main", "args.dispatch_function(args)"),
    _f("vllm/entrypoints/cli/serve.py", 156, "cmd", "uvloop.run(run_server(args))"),
    _f("uvloop/__init__.py", 92, "run", "return runner.run(wrapper())"),
    (
        "/usr/lib/python3.12/asyncio/runners.py",
        118,
        "run",
        "return self._loop.run_until_complete(task)",
    ),
    ("uvloop/loop.pyx", 1515, "uvloop.loop.Loop.run_until_complete", ""),
    _f("uvloop/__init__.py", 48, "wrapper", "return await main"),
]

ENGINE_START = [
    _f(
        "vllm/v1/engine/core.py",
        1168,
        "run_engine_core",
        "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
    ),
    _f("vllm/v1/engine/core.py", 934, "__init__", "super().__init__("),
]

DIST_FRAMES = [
    _f(
        "vllm/v1/worker/gpu_worker.py",
        251,
        "init_device",
        "init_worker_distributed_environment(self.vllm_config, self.rank,",
    ),
]

WORKER_START = [
    _f(
        "vllm/v1/executor/multiproc_executor.py",
        734,
        "worker_main",
        "worker = WorkerProc(*args, **kwargs)",
    ),
    _f("vllm/v1/executor/multiproc_executor.py", 560, "__init__", "self.worker.init_device()"),
    _f("vllm/v1/worker/worker_base.py", 317, "init_device", "self.worker.init_device()"),
]


KV_FRAMES = [
    _f(
        "vllm/v1/engine/core.py",
        132,
        "__init__",
        "kv_cache_config = self._initialize_kv_caches(vllm_config)",
    ),
    _f(
        "vllm/v1/engine/core.py",
        268,
        "_initialize_kv_caches",
        "kv_cache_configs = get_kv_cache_configs(",
    ),
    _f(
        "vllm/v1/core/kv_cache_utils.py",
        2098,
        "get_kv_cache_configs",
        "_check_enough_kv_cache_memory(",
    ),
]


def heads_not_divisible(heads: int, tp: int) -> Failure:
    """TP not dividing the attention heads (config validation in the API server)."""
    exc = (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\n"
        f"  Value error, Total number of attention heads ({heads}) must be divisible by tensor "
        f"parallel size ({tp}). [type=value_error, input_value=ArgsKwargs((), {{'model_co...}}), "
        "input_type=ArgsKwargs]\n"
        "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"
    )
    frames = CLI_FRAMES + [
        _f(
            "vllm/entrypoints/openai/api_server.py",
            1944,
            "run_server",
            "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
        ),
        _f("vllm/engine/arg_utils.py", 1712, "create_engine_config", "config = VllmConfig("),
    ]
    return Failure(exc, frames, "config", exit_code=1)


def max_len_too_long(user: int, derived: int) -> Failure:
    """--max-model-len above the model's max_position_embeddings."""
    exc = (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
        f"  Value error, User-specified max_model_len ({user}) is greater than the derived "
        f"max_model_len (max_position_embeddings={derived} or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with "
        "extreme caution. If the model uses relative position encoding (RoPE), positions "
        "exceeding derived_max_model_len lead to nan. If the model uses absolute position "
        "encoding, positions exceeding derived_max_model_len will cause a CUDA array "
        "out-of-bounds error. [type=value_error, input_value=ArgsKwargs((), {'model': ...}), "
        "input_type=ArgsKwargs]\n"
        "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"
    )
    frames = CLI_FRAMES + [
        _f("vllm/engine/arg_utils.py", 1402, "create_model_config", "return ModelConfig("),
    ]
    return Failure(exc, frames, "config", exit_code=1)


def batched_below_seqs(batched: int, seqs: int) -> Failure:
    """--max-num-seqs above the token budget per step (vLLM's SchedulerConfig refuses it)."""
    exc = (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig\n"
        f"  Value error, max_num_batched_tokens ({batched}) must be greater than or equal to "
        f"max_num_seqs ({seqs}). [type=value_error, input_value=ArgsKwargs((), "
        "{'runner_type': ...}), input_type=ArgsKwargs]\n"
        "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"
    )
    frames = CLI_FRAMES + [
        _f(
            "vllm/engine/arg_utils.py",
            2617,
            "create_engine_config",
            "scheduler_config = SchedulerConfig(",
        ),
    ]
    return Failure(exc, frames, "config", exit_code=1)


def world_exceeds_gpus(world: int, gpus: int) -> Failure:
    """More ranks on this node than it has GPUs (e.g. -tp 2 without --nnodes 2)."""
    exc = (
        f"ValueError: World size ({world}) is larger than the number of available GPUs "
        f"({gpus}) in this node. If this is intentional and you are using:\n"
        "- ray, set '--distributed-executor-backend ray'.\n"
        "- multiprocessing, set '--nnodes' appropriately."
    )
    frames = CLI_FRAMES + [
        _f(
            "vllm/engine/arg_utils.py",
            1731,
            "create_engine_config",
            "parallel_config = ParallelConfig(",
        ),
        _f("vllm/config/parallel.py", 581, "__post_init__", "raise ValueError("),
    ]
    return Failure(exc, frames, "config", exit_code=1)


# vLLM 0.32's words (vllm/engine/arg_utils.py, create_engine_config) for the per-replica API
# form of data parallelism with a dense model; every rank prints them and exits 1.
EXTERNAL_DP_NON_MOE = (
    "Non-MoE models do not support external data parallel mode. For external load "
    "balancing, launch independent vLLM instances without --data-parallel-* arguments."
)


def external_dp_non_moe() -> Failure:
    """--data-parallel-rank (external load balancing) with DP > 1 for a dense model."""
    frames = CLI_FRAMES + [
        _f(
            "vllm/entrypoints/openai/api_server.py",
            1944,
            "run_server",
            "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
        ),
        _f("vllm/engine/arg_utils.py", 2420, "create_engine_config", "raise ValueError("),
    ]
    return Failure(f"ValueError: {EXTERNAL_DP_NON_MOE}", frames, "config", exit_code=1)


EXTERNAL_DP_WITHOUT_RANK = (
    "Invalid data-parallel launch options: `--data-parallel-external-lb` requires a "
    "data-parallel rank. Set `--data-parallel-rank`, or set `--data-parallel-size` greater "
    "than 1 and use `--nnodes` with `--node-rank` so the rank can be inferred."
)


def external_dp_without_rank() -> Failure:
    """--data-parallel-external-lb with no rank given or inferable (a MoE model's case)."""
    frames = CLI_FRAMES + [
        _f("vllm/engine/arg_utils.py", 2428, "create_engine_config", "raise ValueError("),
    ]
    return Failure(f"ValueError: {EXTERNAL_DP_WITHOUT_RANK}", frames, "config", exit_code=1)


def unknown_model(model: str) -> Failure:
    """A model the simulated catalogue (and so the simulated Hub) does not have."""
    exc = (
        f"ValueError: Invalid repository ID or local directory specified: '{model}'.\n"
        "Please verify the following requirements:\n"
        "1. Provide a valid Hugging Face repository ID.\n"
        "2. Specify a local directory that contains a recognized configuration file.\n"
        "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
        "   - For Mistral models: ensure the presence of a 'params.json'."
    )
    frames = CLI_FRAMES + [
        _f("vllm/engine/arg_utils.py", 1402, "create_model_config", "return ModelConfig("),
        _f(
            "vllm/transformers_utils/config.py",
            520,
            "get_config",
            "raise ValueError(error_message)",
        ),
    ]
    return Failure(exc, frames, "config", exit_code=1)


def gated_repo(model: str) -> Failure:
    """A gated model without a token (vllm_fail_gated_repo_401.txt)."""
    exc = (
        "OSError: You are trying to access a gated repo.\n"
        f"Make sure to have access to it at https://huggingface.co/{model}.\n"
        "401 Client Error. (Request ID: Root=1-6a1f0c3e-5bd0c4f3a2e7d1b96c0e8f41;spark-tui-sim)\n"
        "\n"
        f"Cannot access gated repo for url https://huggingface.co/{model}/resolve/main/config.json.\n"
        f"Access to model {model} is restricted. You must have access to it and be "
        "authenticated to access it. Please log in."
    )
    frames = CLI_FRAMES + [
        _f(
            "transformers/configuration_utils.py",
            721,
            "_get_config_dict",
            "resolved_config_file = cached_file(",
        ),
        _f("transformers/utils/hub.py", 543, "cached_files", "raise OSError("),
    ]
    return Failure(exc, frames, "config", exit_code=1)


def port_in_use() -> Failure:
    """The API port is taken (as real vLLM 0.32.0 says it: the API server binds its socket
    before anything else starts)."""
    frames = CLI_FRAMES + [
        _f(
            "vllm/entrypoints/launchers/api_server/entry.py",
            176,
            "run_server",
            "listen_address, sock = setup_server(args, reuse_port=False)",
        ),
        _f("vllm/tracing/otel.py", 175, "sync_wrapper", "return func(*args, **kwargs)"),
        _f(
            "vllm/entrypoints/launchers/launcher.py",
            398,
            "setup_server",
            "sock = create_server_socket(sock_addr, reuse_port=reuse_port)",
        ),
        _f(
            "vllm/entrypoints/launchers/launcher.py", 348, "create_server_socket", "sock.bind(addr)"
        ),
    ]
    return Failure(
        "OSError: [Errno 98] Address already in use", frames, "config", exit_code=1, prefixed=False
    )


def _store_failure(exc: str) -> Failure:
    """A rank's failure while it opens or joins the rendezvous (torch's TCPStore)."""
    frames = DIST_FRAMES + [
        _f(
            "vllm/distributed/parallel_state.py",
            1215,
            "init_distributed_environment",
            "torch.distributed.init_process_group(",
        ),
        _f("torch/distributed/rendezvous.py", 186, "_create_c10d_store", "return TCPStore("),
    ]
    return Failure(exc, frames, "engine", exit_code=1, log_source="multiproc_executor.py:761")


def store_port_in_use() -> Failure:
    """The rendezvous (TCPStore) port is taken (vllm_fail_port_in_use_torch_store.txt)."""
    exc = (
        "RuntimeError: The server socket has failed to listen on any local network address. "
        "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"
    )
    return _store_failure(exc)


def clients_timeout(seconds: float, joined: int, expected: int) -> Failure:
    """The head's TCPStore gave up waiting for the other ranks."""
    exc = (
        f"torch.distributed.DistStoreError: Timed out after {int(seconds) + 1} seconds waiting "
        f"for clients. {joined}/{expected} clients joined."
    )
    return _store_failure(exc)


def client_timeout(seconds: float, host: str, port: int) -> Failure:
    """A rank could not reach the rendezvous in time (torch c10d client timeout)."""
    exc = (
        f"torch.distributed.DistNetworkError: The client socket has timed out after "
        f"{int(seconds * 1000)}ms while trying to connect to ({host}, {port})."
    )
    return _store_failure(exc)


def client_retry_warning(host: str, port: int) -> str:
    """The c10d warning a connecting rank prints while the store is not there yet."""
    return (
        f"[W{torch_stamp()} socket.cpp:767] [c10d] The client socket cannot be initialized to "
        f"connect to [{host}]:{port} (errno: 111 - Connection refused)."
    )


def free_memory(free_gib: str, total_gib: str, util: float, requested_gib: str) -> Failure:
    """Free memory below gpu_memory_utilization x total (vllm_fail_free_memory_*)."""
    exc = (
        f"ValueError: Free memory on device cuda:0 ({free_gib}/{total_gib} GiB) on startup is "
        f"less than desired GPU memory utilization ({util}, {requested_gib} GiB). Decrease GPU "
        "memory utilization or reduce GPU memory used by other processes."
    )
    frames = [
        _f(
            "vllm/v1/worker/gpu_worker.py",
            283,
            "init_device",
            "self.requested_memory = request_memory(init_snapshot, self.cache_config)",
        ),
        _f("vllm/v1/worker/utils.py", 413, "request_memory", "raise ValueError("),
    ]
    return Failure(exc, frames, "engine", exit_code=1)


def cuda_oom(alloc_gib: float, total_gib: float, free_mib: float, in_use_gib: float) -> Failure:
    """Weights larger than the free memory: torch's CUDA OOM while loading."""
    exc = (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc_gib:.2f} GiB. "
        f"GPU 0 has a total capacity of {total_gib:.2f} GiB of which {free_mib:.2f} MiB is free. "
        f"Including non-PyTorch memory, this process has {in_use_gib:.2f} GiB memory in use. Of "
        f"the allocated memory {max(0.0, in_use_gib - 0.45):.2f} GiB is allocated by PyTorch, and "
        "20.00 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
        "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    frames = [
        _f(
            "vllm/v1/worker/gpu_model_runner.py",
            5101,
            "load_model",
            "self.model = model_loader.load_model(",
        ),
        _f(
            "vllm/model_executor/model_loader/base_loader.py",
            55,
            "load_model",
            "self.load_weights(model, model_config)",
        ),
        _f(
            "vllm/model_executor/model_loader/default_loader.py",
            397,
            "load_weights",
            "loaded_weights = model.load_weights(self.get_all_weights(model_config, model))",
        ),
        _f("torch/utils/_device.py", 104, "__torch_function__", "return func(*args, **kwargs)"),
    ]
    return Failure(exc, frames, "engine", exit_code=1)


def _kv_check_failure(exc: str, line: int) -> Failure:
    """The engine's KV cache check refusing the memory it has (at `line` of that check)."""
    frames = KV_FRAMES + [
        _f(
            "vllm/v1/core/kv_cache_utils.py",
            line,
            "_check_enough_kv_cache_memory",
            "raise ValueError(",
        ),
    ]
    return Failure(exc, frames, "engine", exit_code=1)


def no_cache_blocks() -> Failure:
    """Nothing left for the KV cache (vllm_fail_no_available_memory_cache_blocks.log)."""
    exc = (
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU "
        "memory reservation on the CPU backend, despite its name). See "
        f"{DOCS_MEMORY} for more details."
    )
    return _kv_check_failure(exc, 721)


def max_seq_len(max_len: int, needed_gib: str, available_gib: str, estimated: int) -> Failure:
    """The KV cache cannot hold one request at max_model_len (vllm_fail_kv_cache_max_seq_len)."""
    exc = (
        f"ValueError: To serve at least one request with the models's max seq len ({max_len}), "
        f"({needed_gib} GiB KV cache is needed, which is larger than the available KV cache "
        f"memory ({available_gib} GiB). Based on the available memory, the estimated maximum "
        f"model length is {estimated}. Try increasing `gpu_memory_utilization` or decreasing "
        f"`max_model_len` when initializing the engine. See {DOCS_MEMORY} for more details."
    )
    return _kv_check_failure(exc, 716)


def peer_lost_lines(rank: int, world: int, peer: str, nccl_version: str) -> list[str]:
    """The NCCL watchdog lines a surviving rank prints when a peer dies after startup
    (compare vllm_fail_nccl_watchdog_timeout_ray.txt)."""
    return [
        f"[rank{rank}]:[E{torch_stamp()} ProcessGroupNCCL.cpp:1895] [PG ID 2 PG GUID 3 Rank "
        f"{rank}] Process group watchdog thread terminated with exception: NCCL error: remote "
        f"process exited or there was a network error, NCCL version {nccl_version}",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.",
        "Last error:",
        f"socketProgress: Connection closed by remote peer {peer}",
        f"[rank{rank}]:[E{torch_stamp()} ProcessGroupNCCL.cpp:577] [Rank {rank}] Some NCCL "
        "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
        "subsequent GPU operations might run on corrupted/incomplete data.",
        f"[rank{rank}]:[E{torch_stamp()} ProcessGroupNCCL.cpp:583] [Rank {rank}] To avoid data "
        "inconsistency, we are taking the entire process down.",
    ]


def report_engine_failure(
    failure: Failure,
    engine: Channel,
    api: Channel | None,
    worker: Channel | None,
) -> None:
    """Print an engine-stage failure as vLLM does: the failing process logs it, the API
    server (if any) follows with "Engine core initialization failed"."""
    if worker is not None:
        worker.error_block(
            "multiproc_executor.py:761",
            ["WorkerProc failed to start."]
            + traceback_lines(WORKER_START + failure.frames, failure.exc_line),
        )
        if api is None:
            return
        engine.error_block(
            failure.log_source,
            ["EngineCore failed to start.", "Traceback (most recent call last):"]
            + [
                line
                for path, no, func, code in ENGINE_START
                for line in (f'  File "{path}", line {no}, in {func}', f"    {code}")
            ]
            + [
                "Exception: WorkerProc initialization failed due to an exception in a "
                "background process. See stack trace for root cause."
            ],
        )
    else:
        engine.error_block(
            failure.log_source,
            ["EngineCore failed to start."]
            + traceback_lines(ENGINE_START + failure.frames, failure.exc_line),
        )
    if api is not None:
        api.raw(
            "\n".join(
                traceback_lines(
                    CLI_FRAMES
                    + [
                        _f(
                            "vllm/v1/engine/utils.py",
                            1249,
                            "wait_for_engine_startup",
                            "raise RuntimeError(",
                        ),
                    ],
                    "RuntimeError: Engine core initialization failed. See root cause above. "
                    "Failed core proc(s): {}",
                )
            ),
            stderr=True,
        )


def report_config_failure(failure: Failure, channel: Channel) -> None:
    """Print a failure raised in the API server process (or a headless worker's main)."""
    text = "\n".join(traceback_lines(failure.frames, failure.exc_line))
    if failure.prefixed:
        channel.raw(text, stderr=True)
    else:
        channel.log.write(text + "\n", stderr=True)


def chat_template_unreadable(template: str, reason: str) -> Failure:
    """`--chat-template PATH` naming a file that cannot be opened (vLLM's chat_utils rule:
    a value without `{`, `}` or a newline is a path, and a path that fails is an error)."""
    exc = (
        f"ValueError: The supplied chat template ({template}) looks like a file path, but it "
        f"failed to be opened. Reason: {reason}"
    )
    frames = CLI_FRAMES + [
        _f(
            "vllm/entrypoints/chat_utils.py",
            1492,
            "load_chat_template",
            "raise ValueError(msg) from e",
        ),
    ]
    return Failure(exc, frames, "config", exit_code=1)

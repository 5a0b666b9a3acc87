"""vLLM's command line, as the simulated engine accepts it.

The top-level parser is `vllm` with the real subcommands, so an unknown flag fails exactly as
vLLM does: argparse prints the top-level usage and `vllm: error: unrecognized arguments: ...`
and exits 2. Flags are declared in vLLM's order (frontend, then engine args) because the
"non-default args" log line lists them in that order. Like vLLM's FlexibleArgumentParser,
`--flag_name` is read as `--flag-name`; sizes accept vLLM's human-readable integers.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any, Callable

from spark_tui.sim.engine import VERSION

SUBCOMMANDS = ("chat", "complete", "serve", "launch", "bench", "collect-env", "run-batch")

_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(value: str) -> int:
    """vLLM's size syntax: lowercase suffixes are decimal ('25.6k' -> 25600), uppercase are
    binary ('3G' -> 3 x 2**30) and take no decimals; a plain integer is itself."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        try:
            return int(number) * _BINARY[suffix]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to "
                f"use {number}{suffix.lower()} instead?"
            ) from exc
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    """Like human_readable_int, also accepting 'auto' / '-1' (vLLM: derive from the model)."""
    if value.strip().lower() in ("auto", "-1"):
        return -1
    return human_readable_int(value)


def json_arg(value: str) -> Any:
    """A JSON object flag (--speculative-config, --compilation-config, ...)."""
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON {value!r}: {exc}") from exc


def compilation_arg(value: str) -> Any:
    """--compilation-config / -O: a JSON object or a bare optimisation level."""
    if re.fullmatch(r"\d+", value.strip()):
        return {"mode": int(value)}
    return json_arg(value)


def optional_str(value: str) -> str | None:
    """vLLM's optional_type(str): 'None' or '' means None."""
    return None if value in ("", "None") else value


# (flags, dest, kind, default, choices). Kinds: str, int, float, hint (human-readable int),
# hint_auto, json, comp (compilation), bool (--x/--no-x), true (store_true), list (nargs +).
_FRONTEND: list[tuple[tuple[str, ...], str, str, Any, Sequence[str] | None]] = [
    (("--headless",), "headless", "true", False, None),
    (("--api-server-count", "-asc"), "api_server_count", "int", None, None),
    (("--config",), "config", "str", None, None),
    (("--chat-template",), "chat_template", "str", None, None),
    (("--chat-template-content-format",), "chat_template_content_format", "str", "auto", None),
    (("--trust-request-chat-template",), "trust_request_chat_template", "bool", False, None),
    (("--default-chat-template-kwargs",), "default_chat_template_kwargs", "json", None, None),
    (("--response-role",), "response_role", "str", "assistant", None),
    (("--enable-auto-tool-choice",), "enable_auto_tool_choice", "bool", False, None),
    (
        ("--exclude-tools-when-tool-choice-none",),
        "exclude_tools_when_tool_choice_none",
        "bool",
        False,
        None,
    ),
    (("--tool-call-parser",), "tool_call_parser", "str", None, None),
    (("--tool-parser-plugin",), "tool_parser_plugin", "str", "", None),
    (("--tool-server",), "tool_server", "str", None, None),
    (("--log-config-file",), "log_config_file", "str", None, None),
    (("--max-log-len",), "max_log_len", "int", None, None),
    (("--disable-fastapi-docs",), "disable_fastapi_docs", "bool", False, None),
    (("--enable-prompt-tokens-details",), "enable_prompt_tokens_details", "bool", False, None),
    (("--enable-server-load-tracking",), "enable_server_load_tracking", "bool", False, None),
    (("--enable-force-include-usage",), "enable_force_include_usage", "bool", False, None),
    (("--enable-tokenizer-info-endpoint",), "enable_tokenizer_info_endpoint", "bool", False, None),
    (("--enable-log-outputs",), "enable_log_outputs", "bool", False, None),
    (("--log-error-stack",), "log_error_stack", "bool", False, None),
    (("--host",), "host", "ostr", None, None),
    (("--port",), "port", "int", 8000, None),
    (("--uds",), "uds", "str", None, None),
    (
        ("--uvicorn-log-level",),
        "uvicorn_log_level",
        "str",
        "info",
        ("critical", "debug", "error", "info", "trace", "warning"),
    ),
    (("--disable-uvicorn-access-log",), "disable_uvicorn_access_log", "bool", False, None),
    (("--allow-credentials",), "allow_credentials", "bool", False, None),
    (("--allowed-origins",), "allowed_origins", "json", ["*"], None),
    (("--allowed-methods",), "allowed_methods", "json", ["*"], None),
    (("--allowed-headers",), "allowed_headers", "json", ["*"], None),
    (("--api-key",), "api_key", "list", None, None),
    (("--lora-modules",), "lora_modules", "list", None, None),
    (("--ssl-keyfile",), "ssl_keyfile", "str", None, None),
    (("--ssl-certfile",), "ssl_certfile", "str", None, None),
    (("--ssl-ca-certs",), "ssl_ca_certs", "str", None, None),
    (("--root-path",), "root_path", "str", None, None),
    (("--middleware",), "middleware", "append", [], None),
    (("--return-tokens-as-token-ids",), "return_tokens_as_token_ids", "bool", False, None),
    (("--enable-request-id-headers",), "enable_request_id_headers", "bool", False, None),
    (("--h11-max-incomplete-event-size",), "h11_max_incomplete_event_size", "int", 4194304, None),
    (("--h11-max-header-count",), "h11_max_header_count", "int", 256, None),
]

_ENGINE: list[tuple[tuple[str, ...], str, str, Any, Sequence[str] | None]] = [
    # ModelConfig
    (("--model",), "model", "str", "Qwen/Qwen3-0.6B", None),
    (("--runner",), "runner", "str", "auto", ("auto", "draft", "generate", "pooling")),
    (("--convert",), "convert", "str", "auto", None),
    (("--tokenizer",), "tokenizer", "ostr", None, None),
    (("--tokenizer-mode",), "tokenizer_mode", "str", "auto", None),
    (("--trust-remote-code",), "trust_remote_code", "bool", False, None),
    (
        ("--dtype",),
        "dtype",
        "str",
        "auto",
        ("auto", "bfloat16", "float", "float16", "float32", "half"),
    ),
    (("--seed",), "seed", "int", 0, None),
    (("--hf-config-path",), "hf_config_path", "str", None, None),
    (("--allowed-local-media-path",), "allowed_local_media_path", "str", "", None),
    (("--allowed-media-domains",), "allowed_media_domains", "list", None, None),
    (("--revision",), "revision", "ostr", None, None),
    (("--code-revision",), "code_revision", "ostr", None, None),
    (("--tokenizer-revision",), "tokenizer_revision", "ostr", None, None),
    (("--max-model-len",), "max_model_len", "hint_auto", None, None),
    (("--quantization", "-q"), "quantization", "ostr", None, None),
    (("--enforce-eager",), "enforce_eager", "bool", False, None),
    (("--max-logprobs",), "max_logprobs", "int", 20, None),
    (("--logprobs-mode",), "logprobs_mode", "str", "raw_logprobs", None),
    (("--disable-sliding-window",), "disable_sliding_window", "bool", False, None),
    (("--disable-cascade-attn",), "disable_cascade_attn", "bool", False, None),
    (("--skip-tokenizer-init",), "skip_tokenizer_init", "bool", False, None),
    (("--enable-prompt-embeds",), "enable_prompt_embeds", "bool", False, None),
    (("--served-model-name",), "served_model_name", "list", None, None),
    (("--config-format",), "config_format", "str", "auto", None),
    (("--hf-token",), "hf_token", "ostr", None, None),
    (("--hf-overrides",), "hf_overrides", "json", None, None),
    (("--pooler-config",), "pooler_config", "json", None, None),
    (("--generation-config",), "generation_config", "str", "auto", None),
    (("--override-generation-config",), "override_generation_config", "json", None, None),
    (("--enable-sleep-mode",), "enable_sleep_mode", "bool", False, None),
    (("--model-impl",), "model_impl", "str", "auto", None),
    (("--logits-processors",), "logits_processors", "list", None, None),
    (("--io-processor-plugin",), "io_processor_plugin", "str", None, None),
    # LoadConfig
    (("--load-format",), "load_format", "str", "auto", None),
    (("--download-dir",), "download_dir", "ostr", None, None),
    (("--safetensors-load-strategy",), "safetensors_load_strategy", "str", "lazy", None),
    (("--model-loader-extra-config",), "model_loader_extra_config", "json", None, None),
    (("--ignore-patterns",), "ignore_patterns", "list", None, None),
    (("--use-tqdm-on-load",), "use_tqdm_on_load", "bool", True, None),
    (("--pt-load-map-location",), "pt_load_map_location", "str", "cpu", None),
    # AttentionConfig / StructuredOutputsConfig
    (("--attention-backend",), "attention_backend", "str", None, None),
    (("--reasoning-parser",), "reasoning_parser", "str", "", None),
    (("--reasoning-parser-plugin",), "reasoning_parser_plugin", "str", "", None),
    (("--structured-outputs-config",), "structured_outputs_config", "json", None, None),
    # ParallelConfig
    (
        ("--distributed-executor-backend",),
        "distributed_executor_backend",
        "str",
        None,
        ("external_launcher", "mp", "ray", "uni"),
    ),
    (("--pipeline-parallel-size", "-pp"), "pipeline_parallel_size", "int", 1, None),
    (("--master-addr",), "master_addr", "str", "127.0.0.1", None),
    (("--master-port",), "master_port", "int", 29501, None),
    (("--nnodes", "-n"), "nnodes", "int", 1, None),
    (("--node-rank", "-r"), "node_rank", "int", 0, None),
    (("--tensor-parallel-size", "-tp"), "tensor_parallel_size", "int", 1, None),
    (("--decode-context-parallel-size", "-dcp"), "decode_context_parallel_size", "int", 1, None),
    (("--prefill-context-parallel-size", "-pcp"), "prefill_context_parallel_size", "int", 1, None),
    (("--data-parallel-size", "-dp"), "data_parallel_size", "int", 1, None),
    (("--data-parallel-rank", "-dpn"), "data_parallel_rank", "int", None, None),
    (("--data-parallel-start-rank", "-dpr"), "data_parallel_start_rank", "int", None, None),
    (("--data-parallel-size-local", "-dpl"), "data_parallel_size_local", "int", None, None),
    (("--data-parallel-address", "-dpa"), "data_parallel_address", "str", None, None),
    (("--data-parallel-rpc-port", "-dpp"), "data_parallel_rpc_port", "int", None, None),
    (("--data-parallel-backend", "-dpb"), "data_parallel_backend", "str", "mp", None),
    (("--data-parallel-hybrid-lb", "-dph"), "data_parallel_hybrid_lb", "bool", False, None),
    (("--data-parallel-external-lb", "-dpe"), "data_parallel_external_lb", "bool", False, None),
    (("--enable-expert-parallel", "-ep"), "enable_expert_parallel", "bool", False, None),
    (("--all2all-backend",), "all2all_backend", "str", None, None),
    (("--enable-dbo",), "enable_dbo", "bool", False, None),
    (("--enable-eplb",), "enable_eplb", "bool", False, None),
    (("--eplb-config",), "eplb_config", "json", None, None),
    (("--expert-placement-strategy",), "expert_placement_strategy", "str", "linear", None),
    (("--max-parallel-loading-workers",), "max_parallel_loading_workers", "int", None, None),
    (("--ray-workers-use-nsight",), "ray_workers_use_nsight", "bool", False, None),
    (("--disable-custom-all-reduce",), "disable_custom_all_reduce", "bool", False, None),
    (("--worker-cls",), "worker_cls", "str", "auto", None),
    (("--worker-extension-cls",), "worker_extension_cls", "str", "", None),
    (("--distributed-timeout-seconds",), "distributed_timeout_seconds", "int", None, None),
    # CacheConfig
    (("--block-size",), "block_size", "int", None, None),
    (
        ("--gpu-memory-utilization", "--device-memory-utilization"),
        "gpu_memory_utilization",
        "float",
        0.9,
        None,
    ),
    (("--kv-cache-memory-bytes", "--kv-cache-memory"), "kv_cache_memory_bytes", "hint", None, None),
    (
        ("--kv-cache-dtype",),
        "kv_cache_dtype",
        "str",
        "auto",
        ("auto", "bfloat16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc"),
    ),
    (("--num-gpu-blocks-override",), "num_gpu_blocks_override", "int", None, None),
    (("--enable-prefix-caching",), "enable_prefix_caching", "bool", None, None),
    (("--prefix-caching-hash-algo",), "prefix_caching_hash_algo", "str", "sha256", None),
    (("--prefix-match-unit",), "prefix_match_unit", "int", None, None),
    (("--cpu-offload-gb",), "cpu_offload_gb", "float", 0.0, None),
    (("--kv-sharing-fast-prefill",), "kv_sharing_fast_prefill", "bool", False, None),
    (("--mamba-cache-dtype",), "mamba_cache_dtype", "str", "auto", None),
    (("--mamba-ssm-cache-dtype",), "mamba_ssm_cache_dtype", "str", "auto", None),
    (("--mamba-block-size",), "mamba_block_size", "int", None, None),
    (("--mamba-cache-mode",), "mamba_cache_mode", "str", None, ("align", "none")),
    (("--kv-offloading-size",), "kv_offloading_size", "float", None, None),
    (("--kv-offloading-backend",), "kv_offloading_backend", "str", None, None),
    # MultiModalConfig
    (("--limit-mm-per-prompt",), "limit_mm_per_prompt", "json", None, None),
    (("--language-model-only",), "language_model_only", "bool", False, None),
    (("--media-io-kwargs",), "media_io_kwargs", "json", None, None),
    (("--mm-processor-kwargs",), "mm_processor_kwargs", "json", None, None),
    (("--mm-processor-cache-gb",), "mm_processor_cache_gb", "float", 4.0, None),
    (("--mm-processor-cache-type",), "mm_processor_cache_type", "str", "lru", None),
    (("--mm-encoder-tp-mode",), "mm_encoder_tp_mode", "str", "weights", ("data", "weights")),
    (("--mm-encoder-attn-backend",), "mm_encoder_attn_backend", "str", None, None),
    (("--skip-mm-profiling",), "skip_mm_profiling", "bool", False, None),
    # LoRAConfig
    (("--enable-lora",), "enable_lora", "bool", None, None),
    (("--max-loras",), "max_loras", "int", 1, None),
    (("--max-lora-rank",), "max_lora_rank", "int", 16, None),
    # ObservabilityConfig
    (("--show-hidden-metrics-for-version",), "show_hidden_metrics_for_version", "str", None, None),
    (("--otlp-traces-endpoint",), "otlp_traces_endpoint", "str", None, None),
    (("--collect-detailed-traces",), "collect_detailed_traces", "list", None, None),
    (("--kv-cache-metrics",), "kv_cache_metrics", "bool", False, None),
    (("--cudagraph-metrics",), "cudagraph_metrics", "bool", False, None),
    # SchedulerConfig
    (("--max-num-batched-tokens",), "max_num_batched_tokens", "hint", None, None),
    (("--max-num-seqs",), "max_num_seqs", "int", None, None),
    (("--long-prefill-token-threshold",), "long_prefill_token_threshold", "int", 0, None),
    (("--scheduling-policy",), "scheduling_policy", "str", "fcfs", ("fcfs", "priority")),
    (("--enable-chunked-prefill",), "enable_chunked_prefill", "bool", None, None),
    (("--disable-chunked-mm-input",), "disable_chunked_mm_input", "bool", False, None),
    (("--scheduler-cls",), "scheduler_cls", "str", None, None),
    (("--disable-hybrid-kv-cache-manager",), "disable_hybrid_kv_cache_manager", "bool", None, None),
    (("--async-scheduling",), "async_scheduling", "bool", None, None),
    (("--stream-interval",), "stream_interval", "int", 1, None),
    # CompilationConfig / KernelConfig / VllmConfig
    (("--max-cudagraph-capture-size",), "max_cudagraph_capture_size", "int", None, None),
    (("--moe-backend",), "moe_backend", "str", "auto", None),
    (("--linear-backend",), "linear_backend", "str", "auto", None),
    (("--gdn-decode-kernel",), "gdn_decode_kernel", "str", "auto", None),
    (("--gdn-prefill-backend",), "gdn_prefill_backend", "str", "auto", None),
    (("--enable-flashinfer-autotune",), "enable_flashinfer_autotune", "bool", True, None),
    (("--speculative-config", "-sc"), "speculative_config", "json", None, None),
    (("--kv-transfer-config",), "kv_transfer_config", "json", None, None),
    (("--kv-events-config",), "kv_events_config", "json", None, None),
    (("--ec-transfer-config",), "ec_transfer_config", "json", None, None),
    (("--compilation-config", "-O", "-cc"), "compilation_config", "comp", None, None),
    (("--attention-config", "-ac"), "attention_config", "json", None, None),
    (("--kernel-config",), "kernel_config", "json", None, None),
    (("--additional-config",), "additional_config", "json", None, None),
    # AsyncEngineArgs
    (("--disable-log-stats",), "disable_log_stats", "true", False, None),
    (("--enable-log-requests",), "enable_log_requests", "bool", False, None),
]

_TYPES: dict[str, Callable[[str], Any]] = {
    "str": str,
    "ostr": optional_str,
    "int": int,
    "float": float,
    "hint": human_readable_int,
    "hint_auto": human_readable_int_or_auto,
    "json": json_arg,
    "comp": compilation_arg,
}


def _add(parser: argparse.ArgumentParser, spec: tuple[tuple[str, ...], str, str, Any, Any]) -> None:
    flags, dest, kind, default, choices = spec
    if kind == "bool":
        parser.add_argument(
            *flags, dest=dest, action=argparse.BooleanOptionalAction, default=default
        )
    elif kind == "true":
        parser.add_argument(*flags, dest=dest, action="store_true", default=default)
    elif kind == "list":
        parser.add_argument(*flags, dest=dest, nargs="+", default=default)
    elif kind == "append":
        parser.add_argument(*flags, dest=dest, action="append", default=list(default))
    else:
        parser.add_argument(*flags, dest=dest, type=_TYPES[kind], default=default, choices=choices)


def serve_arguments() -> list[tuple[tuple[str, ...], str, str, Any, Any]]:
    """Every serve flag spec, in vLLM's order (frontend first, then engine args)."""
    return list(_FRONTEND) + list(_ENGINE)


def build_parser() -> argparse.ArgumentParser:
    """The `vllm` parser with its subcommands; only `serve` is simulated in full."""
    top = argparse.ArgumentParser(prog="vllm", description="vLLM CLI", allow_abbrev=False)
    top.add_argument("-v", "--version", action="version", version=VERSION)
    subs = top.add_subparsers(required=False, dest="subparser")
    for name in SUBCOMMANDS:
        if name != "serve":
            sub = subs.add_parser(name, help=f"{name} (not simulated)", allow_abbrev=False)
            sub.add_argument("rest", nargs=argparse.REMAINDER)
            continue
        serve = subs.add_parser(
            "serve",
            help="Launch a local OpenAI-compatible API server to serve LLM completions via HTTP.",
            usage="vllm serve [model_tag] [options]",
            description="Launch a local OpenAI-compatible API server (spark-tui SIMULATED engine).",
            allow_abbrev=False,
        )
        serve.add_argument("model_tag", nargs="?", default=None, help="The model tag to serve")
        for spec in serve_arguments():
            _add(serve, spec)
    return top


def normalise_argv(argv: Sequence[str]) -> list[str]:
    """vLLM's FlexibleArgumentParser spelling rules: `--max_model_len=8` -> `--max-model-len=8`."""
    out: list[str] = []
    for token in argv:
        if token.startswith("--help="):
            # `--help=all` (or a section name) prints the help, as vLLM's parser does.
            out.append("--help")
        elif token.startswith("--") and len(token) > 2:
            key, sep, value = token.partition("=")
            out.append(key.replace("_", "-") + sep + value)
        else:
            out.append(token)
    return out


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse `vllm ...` arguments (without the program name); exits 2 as vLLM on errors."""
    parser = build_parser()
    args = parser.parse_args(normalise_argv(argv))
    if args.subparser is None:
        parser.print_help()
        sys.exit(0)
    if args.subparser == "serve":
        if args.model_tag is None:
            args.model_tag = args.model
        args.model = args.model_tag
    return args


def defaults() -> dict[str, Any]:
    """The default of every serve flag."""
    out: dict[str, Any] = {"model_tag": None}
    for _flags, dest, _kind, default, _choices in serve_arguments():
        out[dest] = default
    return out


def non_default_args(args: argparse.Namespace) -> dict[str, Any]:
    """The flags that differ from vLLM's defaults, in declaration order (the log line's dict)."""
    base = defaults()
    out: dict[str, Any] = {}
    if args.model_tag is not None:
        out["model_tag"] = args.model_tag
    for key in base:
        if key == "model_tag":
            continue
        value = getattr(args, key, None)
        if key == "model":
            if value != base[key] or args.model_tag is not None:
                out[key] = value
            continue
        if value != base[key]:
            out[key] = value
    return out

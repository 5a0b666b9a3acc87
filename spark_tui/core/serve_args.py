"""Read a rendered `vllm serve MODEL ...` argv the way vLLM's argument parser would."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from spark_tui.core.errors import InputError

# vLLM's CacheConfig default (0.9 before the CUDA-graph memory profiling change; 0.92 in
# current releases, which is what the nightly images the recipes use carry).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
DEFAULT_PORT = 8000
# Bounds on integers read from a command: far above any real value, low enough that the
# fit arithmetic on them stays exact (a typo'd 10**400 is refused, not computed with).
MAX_INT = 2**50
MAX_PARALLEL = 1024

# Flags that take no value (store_true or argparse.BooleanOptionalAction in vLLM).
# A flag not listed here takes a value when the next token is not itself a flag.
BOOLEAN_FLAGS = frozenset(
    {
        "trust-remote-code",
        "enable-prefix-caching",
        "enable-chunked-prefill",
        "enable-auto-tool-choice",
        "enable-expert-parallel",
        "enable-eplb",
        "enable-flashinfer-autotune",
        "enable-lora",
        "enable-prompt-embeds",
        "enable-sleep-mode",
        "enable-log-requests",
        "enable-log-outputs",
        "enable-request-id-headers",
        "enable-mamba-fine-grained-prefix-cache",
        "enforce-eager",
        "headless",
        "async-scheduling",
        "disable-log-requests",
        "disable-log-stats",
        "disable-custom-all-reduce",
        "disable-sliding-window",
        "disable-cascade-attn",
        "disable-hybrid-kv-cache-manager",
        "disable-frontend-multiprocessing",
        "disable-uvicorn-access-log",
        "language-model-only",
        "skip-tokenizer-init",
        "api-server-count-auto",
        "data-parallel-hybrid-lb",
        "data-parallel-external-lb",
        "data-parallel-multi-port-external-lb",
        "calculate-kv-scales",
        "use-tqdm-on-load",
    }
)

# Flags that take one or more values (argparse nargs="+").
MULTI_VALUE_FLAGS = frozenset({"served-model-name", "middleware", "allowed-origins"})

# Short aliases vLLM accepts, mapped to their long names.
SHORT_ALIASES = {
    "tp": "tensor-parallel-size",
    "pp": "pipeline-parallel-size",
    "dp": "data-parallel-size",
    "dpa": "data-parallel-address",
    "dpb": "data-parallel-backend",
    "dpe": "data-parallel-external-lb",
    "dph": "data-parallel-hybrid-lb",
    "dpm": "data-parallel-multi-port-external-lb",
    "dpn": "data-parallel-rank",
    "dpp": "data-parallel-rpc-port",
    "dpl": "data-parallel-size-local",
    "dpr": "data-parallel-start-rank",
    "dcp": "decode-context-parallel-size",
    "ep": "enable-expert-parallel",
    "q": "quantization",
    "O": "compilation-config",
}

# Long names vLLM also accepts because argparse takes an unambiguous prefix; the first
# is what vLLM's own memory report prints ("Replace ... with `--kv-cache-memory=N`").
PREFIX_ALIASES = {"kv-cache-memory": "kv-cache-memory-bytes"}

_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(value: str) -> int:
    """vLLM's size/count syntax: lowercase suffixes are decimal, uppercase binary.

    '3g' is 3*10**9, '3G' is 3*2**30, '25.6k' is 25600; a decimal with a binary suffix
    ('1.5G') is refused as vLLM refuses it.
    """
    text = value.strip()
    match = _HUMAN_INT.fullmatch(text)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError(
                f"decimals are not allowed with binary suffixes like {suffix}; "
                f"did you mean {number}{suffix.lower()}?"
            )
        return int(number) * _BINARY[suffix]
    return int(text)


@dataclass
class ServeArgs:
    """The settings of one `vllm serve` command that planning and the fit check read.

    Unset values carry vLLM's defaults where vLLM has a fixed one, else None (for example
    `max_model_len` None means "the model's maximum"). `flags` holds every flag as written
    (long name with dashes, value or None), for anything not modelled here.
    """

    model: str
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    # The gpu-mem-util-gb mod's flag: the budget in GiB, which wins over the fraction.
    gpu_memory_utilization_gb: float | None = None
    max_model_len: int | None = None
    # `--max-model-len auto` (or -1): vLLM picks the model's maximum, or the longest that fits.
    max_model_len_auto: bool = False
    kv_cache_dtype: str = "auto"
    kv_cache_memory_bytes: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    enable_prefix_caching: bool | None = None
    enable_expert_parallel: bool = False
    host: str | None = None
    port: int = DEFAULT_PORT
    served_model_name: list[str] = field(default_factory=list)
    distributed_executor_backend: str | None = None
    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool = False
    reasoning_parser: str | None = None
    speculative_config: dict[str, Any] | None = None
    quantization: str | None = None
    dtype: str = "auto"
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None
    headless: bool = False
    flags: dict[str, str | None] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        """Ranks the command needs: TP x PP x DP (one GPU, so one Spark, per rank)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    def has(self, name: str) -> bool:
        """Whether the command carries the flag `name` (long name, with or without dashes)."""
        return "--" + _canonical(name.lstrip("-")) in self.flags


def _canonical(name: str) -> str:
    """A flag's long name as vLLM reads it: dashes, short aliases expanded.

    For a dotted flag (`--speculative-config.num_speculative_tokens`) only the part before
    the dot is normalised: the rest is a JSON key.
    """
    head, dot, tail = name.partition(".")
    head = SHORT_ALIASES.get(head, head).replace("_", "-")
    head = PREFIX_ALIASES.get(head, head)
    return head + dot + tail


def _is_flag(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    return re.fullmatch(r"-\d+(\.\d+)?", token) is None  # "-1" is a value, not a flag


def _bad(flag: str, value: str | None, accepted: str) -> InputError:
    return InputError(
        f"vllm serve: --{flag} {value!r} is not {accepted}",
        f"give --{flag} {accepted} in the recipe command or with --set",
    )


def _int(flag: str, value: str | None, human: bool = False, maximum: int = MAX_INT) -> int:
    if value is None:
        raise _bad(flag, value, "an integer")
    try:
        number = human_readable_int(value) if human else int(value)
    except ValueError as exc:
        accepted = (
            "an integer such as 3221225472, 3G (3 GiB) or 3g (3*10^9)" if human else ("an integer")
        )
        raise _bad(flag, value, accepted) from exc
    if abs(number) > maximum:
        raise _bad(flag, value, f"an integer of at most {maximum}")
    return number


def _bool(flag: str, value: str | None) -> bool:
    if value is None:
        return True
    low = value.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise _bad(flag, value, "true or false")


def _json(flag: str, value: str | None) -> dict[str, Any]:
    try:
        data = json.loads(value or "")
    except json.JSONDecodeError as exc:
        raise _bad(flag, value, "a JSON object") from exc
    if not isinstance(data, dict):
        raise _bad(flag, value, "a JSON object")
    return data


def _tokens(argv: list[str]) -> tuple[str | None, list[tuple[str, str | None]]]:
    """(positional model, [(flag long name, value)]) in order."""
    args = list(argv)
    if args and args[0].rsplit("/", 1)[-1] == "vllm":
        args = args[1:]
        if args and args[0] == "serve":
            args = args[1:]
    model: str | None = None
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        token = args[i]
        if not _is_flag(token):
            if model is None:
                model = token
            i += 1
            continue
        raw = token.lstrip("-")
        value: str | None = None
        if "=" in raw:
            raw, value = raw.split("=", 1)
            pairs.append((raw, value))
            i += 1
            continue
        name = _canonical(raw)
        base = name[3:] if name.startswith("no-") else name
        if base in BOOLEAN_FLAGS:
            pairs.append((raw, None))
            i += 1
            continue
        if name in MULTI_VALUE_FLAGS:
            values = []
            i += 1
            while i < len(args) and not _is_flag(args[i]):
                values.append(args[i])
                i += 1
            pairs.append((raw, " ".join(values) if values else None))
            continue
        if i + 1 < len(args) and not _is_flag(args[i + 1]):
            pairs.append((raw, args[i + 1]))
            i += 2
        else:
            pairs.append((raw, None))
            i += 1
    return model, pairs


def parse_serve_args(argv: list[str]) -> ServeArgs:
    """Parse `vllm serve MODEL --flag value --flag=value --no-x ...` into ServeArgs.

    Later flags win, as with argparse. Dotted JSON flags (`--speculative-config.method mtp`)
    are merged into their object. Raises InputError on a value vLLM would refuse.
    """
    positional, pairs = _tokens(argv)
    flags: dict[str, str | None] = {}
    dotted: dict[str, dict[str, Any]] = {}
    for raw, value in pairs:
        name = _canonical(raw)
        if "." in name:
            head, _, key = name.partition(".")
            dotted.setdefault(head, {})[key] = _loose(value)
        flags["--" + name] = value
    model = positional or flags.get("--model") or flags.get("--model-tag")
    if not model:
        raise InputError(
            "vllm serve: no model given",
            "write the command as `vllm serve MODEL --flag value ...`",
        )
    out = ServeArgs(model=model, flags=flags)
    for key, value in flags.items():
        if "." not in key:
            _apply(out, key[2:], value)
    for head, extra in dotted.items():
        if head == "speculative-config":
            out.speculative_config = {**(out.speculative_config or {}), **extra}
    return out


def _loose(value: str | None) -> Any:
    """A dotted-flag value: JSON when it parses (numbers, booleans), else the string."""
    if value is None:
        return True
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _apply(out: ServeArgs, name: str, value: str | None) -> None:
    negated = name.startswith("no-")
    base = name[3:] if negated else name
    if base in (
        "enable-prefix-caching",
        "enable-auto-tool-choice",
        "headless",
        "enable-expert-parallel",
    ):
        flag = (not _bool(base, value)) if negated else _bool(base, value)
        setattr(out, base.replace("-", "_"), flag)
        return
    if negated:
        return
    if name in (
        "tensor-parallel-size",
        "pipeline-parallel-size",
        "data-parallel-size",
        "decode-context-parallel-size",
        "nnodes",
    ):
        number = _int(name, value, maximum=MAX_PARALLEL)
        if number < 1:
            raise _bad(name, value, "an integer >= 1")
        setattr(out, name.replace("-", "_"), number)
    elif name in ("node-rank", "max-num-seqs", "block-size", "master-port"):
        setattr(out, name.replace("-", "_"), _int(name, value))
    elif name == "port":
        out.port = _int(name, value)
    elif name == "max-num-batched-tokens":
        out.max_num_batched_tokens = _int(name, value, human=True)
    elif name == "max-model-len":
        if value is not None and value.strip().lower() in ("auto", "-1"):
            out.max_model_len = None  # vLLM: the model's maximum, or the longest that fits
            out.max_model_len_auto = True
        else:
            out.max_model_len = _int(name, value, human=True)
            out.max_model_len_auto = False
    elif name == "kv-cache-memory-bytes":
        out.kv_cache_memory_bytes = _int(name, value, human=True)
    elif name == "gpu-memory-utilization":
        try:
            util = float(value or "")
        except ValueError as exc:
            raise _bad(name, value, "a number in (0, 1]") from exc
        if not 0 < util <= 1:
            raise _bad(name, value, "a number in (0, 1]")
        out.gpu_memory_utilization = util
    elif name == "gpu-memory-utilization-gb":
        try:
            gib = float(value or "")
        except ValueError as exc:
            raise _bad(name, value, "a number of GiB > 0") from exc
        if not 0 < gib <= MAX_INT:
            raise _bad(name, value, "a number of GiB > 0")
        out.gpu_memory_utilization_gb = gib
    elif name == "speculative-config":
        out.speculative_config = _json(name, value)
    elif name == "served-model-name":
        out.served_model_name = (value or "").split()
    elif name in ("kv-cache-dtype", "dtype"):
        setattr(out, name.replace("-", "_"), value or "auto")
    elif name in (
        "host",
        "master-addr",
        "distributed-executor-backend",
        "tool-call-parser",
        "reasoning-parser",
        "quantization",
    ):
        setattr(out, name.replace("-", "_"), value)

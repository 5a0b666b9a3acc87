"""The settings a recipe may carry (sparkrun names), their types, ranges and vLLM flags."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# Kinds a setting's value can have; `size` is a byte count written like 3G or 3GiB,
# `json` a JSON object passed to vLLM as one argument.
KINDS = ("int", "float", "bool", "str", "choice", "size", "json")

# Upper bounds where vLLM has none: far above any Spark cluster or model, low enough that
# the fit arithmetic on them stays exact (a typo'd 10**400 is refused, not computed with).
MAX_PARALLEL = 1024
MAX_TOKENS = 2**32
MAX_GIB = 2**20
MAX_BYTES = 2**50


@dataclass(frozen=True)
class Setting:
    """One known setting: its type, accepted range or choices, and the vLLM flag it maps to."""

    key: str
    kind: str
    flag: str
    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    # vLLM's own default. A false setting whose vLLM default is true must be rendered as
    # the `--no-` form (removing the flag would leave the feature on); a parallel size at
    # vLLM's default is not added to a command that leaves it out (as sparkrun renders it).
    vllm_default: bool | int | None = None
    # For bools: whether vLLM has a `--no-<flag>` form (argparse BooleanOptionalAction).
    negatable: bool = True
    # Parallel sizes and ports cannot be removed: fit and plan need a number.
    removable: bool = True
    # Flags the launch plan adds per rank (rendezvous, DP rank wiring): render leaves them alone.
    plan_managed: bool = False
    # vLLM takes several values after this flag (`--served-model-name a b`).
    multi_value: bool = False
    # Overrides the generated description of accepted values.
    accepted: str = ""
    # Values vLLM's flag takes besides the kind's (`--max-model-len auto`, or its -1).
    words: tuple[str, ...] = ()

    @property
    def negative_flag(self) -> str:
        """The `--no-` form of a boolean flag."""
        return "--no-" + self.flag[2:]

    def accepted_form(self) -> str:
        """A short description of the values this setting accepts, for error messages."""
        if self.accepted:
            return self.accepted
        if self.kind == "int":
            if self.minimum is not None and self.maximum is not None:
                return f"an integer from {int(self.minimum)} to {int(self.maximum)}"
            if self.minimum is not None:
                return f"an integer >= {int(self.minimum)}"
            return "an integer"
        if self.kind == "float":
            if self.minimum is not None and self.maximum is not None:
                left = "(" if self.exclusive_minimum else "["
                return f"a number in {left}{self.minimum:g}, {self.maximum:g}]"
            if self.minimum is not None:
                op = ">" if self.exclusive_minimum else ">="
                return f"a number {op} {self.minimum:g}"
            return "a number"
        if self.kind == "bool":
            return "true or false (also on/off, yes/no, 1/0)"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "size":
            return "a byte count such as 3221225472, 3G, 3GiB or 3GB"
        if self.kind == "json":
            return 'a JSON object such as \'{"method":"mtp","num_speculative_tokens":4}\''
        return "a string"


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _s(key: str, kind: str, help: str = "", flag: str | None = None, **kw: Any) -> Setting:
    return Setting(key=key, kind=kind, flag=flag or _flag(key), help=help, **kw)


_SETTINGS: tuple[Setting, ...] = (
    # parallelism
    _s(
        "tensor_parallel",
        "int",
        "tensor-parallel ranks (one per Spark)",
        flag="--tensor-parallel-size",
        minimum=1,
        maximum=MAX_PARALLEL,
        removable=False,
        vllm_default=1,
        aliases=("-tp",),
    ),
    _s(
        "pipeline_parallel",
        "int",
        "pipeline stages",
        flag="--pipeline-parallel-size",
        minimum=1,
        maximum=MAX_PARALLEL,
        removable=False,
        vllm_default=1,
        aliases=("-pp",),
    ),
    _s(
        "data_parallel",
        "int",
        "data-parallel replicas",
        flag="--data-parallel-size",
        minimum=1,
        maximum=MAX_PARALLEL,
        removable=False,
        vllm_default=1,
        aliases=("-dp",),
    ),
    _s(
        "decode_context_parallel_size",
        "int",
        "decode context-parallel size",
        vllm_default=1,
        minimum=1,
        maximum=MAX_PARALLEL,
        aliases=("-dcp",),
    ),
    _s(
        "distributed_executor_backend",
        "choice",
        "executor backend (ray selects vllm-ray)",
        choices=("mp", "ray", "uni", "external_launcher"),
    ),
    _s(
        "enable_expert_parallel",
        "bool",
        "expert parallelism for MoE layers",
        vllm_default=False,
        aliases=("-ep",),
    ),
    # memory and scheduling
    _s(
        "gpu_memory_utilization",
        "float",
        "fraction of memory vLLM budgets per node",
        minimum=0.0,
        maximum=1.0,
        exclusive_minimum=True,
    ),
    # Not vLLM's own flag: eugr's gpu-mem-util-gb mod patches vLLM to take the budget in GiB
    # (it then wins over the fraction). Recipes feed it from their gpu_memory_utilization.
    _s(
        "gpu_memory_utilization_gb",
        "float",
        "GiB vLLM budgets per node (flag of the gpu-mem-util-gb mod)",
        minimum=0.0,
        maximum=MAX_GIB,
        exclusive_minimum=True,
    ),
    _s("kv_cache_memory_bytes", "size", "explicit KV-cache budget per GPU (wins over utilization)"),
    _s(
        "kv_cache_dtype",
        "choice",
        "KV-cache precision",
        choices=("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"),
    ),
    _s(
        "max_model_len",
        "int",
        "context limit per request (tokens)",
        minimum=1,
        maximum=MAX_TOKENS,
        accepted="an integer from 1 to 4294967296 (also 128k = 128000, 128K = 131072), or auto "
        "(the longest that fits, as vLLM chooses it)",
        words=("auto", "-1"),
    ),
    _s("max_num_seqs", "int", "sequences per scheduler iteration", minimum=1, maximum=2**20),
    _s(
        "max_num_batched_tokens",
        "int",
        "token budget per scheduler iteration",
        minimum=1,
        maximum=MAX_TOKENS,
    ),
    _s("block_size", "int", "KV-cache block size (tokens)", minimum=1, maximum=2**16),
    _s("enable_prefix_caching", "bool", "reuse cached prompt prefixes", vllm_default=True),
    _s("enable_chunked_prefill", "bool", "mix prefill chunks with decode", vllm_default=True),
    _s(
        "cpu_offload_gb",
        "float",
        "GiB of weights offloaded to CPU memory",
        minimum=0.0,
        maximum=MAX_GIB,
    ),
    _s("swap_space", "float", "CPU swap space per GPU (GiB)", minimum=0.0, maximum=MAX_GIB),
    _s("enforce_eager", "bool", "disable CUDA graphs", vllm_default=False),
    _s("mamba_cache_mode", "str", "Mamba/linear-attention state cache mode"),
    _s(
        "mm_processor_cache_gb",
        "float",
        "multimodal processor cache (GiB)",
        minimum=0.0,
        maximum=MAX_GIB,
    ),
    _s("mm_encoder_tp_mode", "choice", "multimodal encoder TP mode", choices=("weights", "data")),
    _s("limit_mm_per_prompt", "json", "multimodal items per prompt"),
    # model and weights
    _s(
        "dtype",
        "choice",
        "activation dtype",
        choices=("auto", "half", "float16", "bfloat16", "float", "float32"),
    ),
    _s("quantization", "str", "weight quantization method", aliases=("-q",)),
    _s("load_format", "str", "weight loader"),
    _s("trust_remote_code", "bool", "run the model's own code", vllm_default=False),
    _s("revision", "str", "model revision"),
    _s("tokenizer", "str", "tokenizer repo or path"),
    _s("seed", "int", "random seed", minimum=0, maximum=2**63 - 1),
    _s("hf_overrides", "json", "overrides of the model's config"),
    # kernels and compilation
    _s("attention_backend", "str", "attention kernel backend"),
    _s("moe_backend", "str", "MoE kernel backend"),
    _s("linear_backend", "str", "linear-layer kernel backend"),
    _s("gdn_decode_kernel", "str", "gated delta-net decode kernel"),
    _s("enable_flashinfer_autotune", "bool", "FlashInfer autotuning at startup", vllm_default=True),
    _s("compilation_config", "json", "torch.compile / CUDA graph settings", aliases=("-O",)),
    _s("speculative_config", "json", "speculative decoding (e.g. MTP)"),
    # serving
    _s("host", "str", "API bind address", removable=False),
    _s("port", "int", "API port", minimum=1, maximum=65535, removable=False),
    _s("served_model_name", "str", "model id clients use", multi_value=True),
    _s("tool_call_parser", "str", "tool-call parser (none removes it)"),
    _s("tool_parser_plugin", "str", "tool-parser plugin file"),
    _s(
        "enable_auto_tool_choice",
        "bool",
        "let the model call tools",
        vllm_default=False,
        negatable=True,
    ),
    _s("reasoning_parser", "str", "reasoning parser (none removes it)"),
    _s("reasoning_parser_plugin", "str", "reasoning-parser plugin file"),
    _s("chat_template", "str", "chat template path"),
    _s("generation_config", "str", "generation config source"),
    _s("default_chat_template_kwargs", "json", "default chat-template arguments"),
    _s("override_generation_config", "json", "generation parameter overrides"),
    _s("max_logprobs", "int", "logprobs per token", minimum=0, maximum=2**20),
    # rendezvous: the launch plan writes these per rank
    _s(
        "master_port",
        "int",
        "rendezvous port (default 29501)",
        plan_managed=True,
        minimum=1,
        maximum=65535,
        removable=False,
    ),
    _s(
        "data_parallel_rpc_port",
        "int",
        "data-parallel RPC port (default 13345)",
        plan_managed=True,
        minimum=1,
        maximum=65535,
        removable=False,
    ),
    # vllm-ray only: the Ray cluster the plan starts before `vllm serve`
    _s(
        "ray_port",
        "int",
        "Ray GCS port (vllm-ray, default 46379)",
        plan_managed=True,
        minimum=1,
        maximum=65535,
        removable=False,
    ),
    _s(
        "dashboard_port",
        "int",
        "Ray dashboard port (vllm-ray, default 8265)",
        plan_managed=True,
        minimum=1,
        maximum=65535,
        removable=False,
    ),
    # cabling with a subnet per cable (a ring): see core.network_env
    _s(
        "bootstrap_interface",
        "str",
        "LAN interface every node reaches (rendezvous of 3+ Sparks on a ring, e.g. enP7s7)",
        plan_managed=True,
    ),
    _s(
        "ring_merge_nics",
        "bool",
        "NCCL_IB_MERGE_NICS on a ring (default on, NCCL's own)",
        plan_managed=True,
    ),
)

SETTINGS: dict[str, Setting] = {s.key: s for s in _SETTINGS}

# Placeholders a command may use without a default: filled from the recipe itself.
BUILTIN_PLACEHOLDERS = frozenset({"model", "model_revision", "container", "name"})


def get(key: str) -> Setting | None:
    """The known setting called `key`, or None."""
    return SETTINGS.get(key)


def flag_spellings(setting: Setting) -> tuple[str, ...]:
    """Every spelling of the setting's flag a command may contain (not the `--no-` form)."""
    names = [setting.flag, "--" + setting.key, *setting.aliases]
    return tuple(dict.fromkeys(names))


def for_flag(flag: str) -> Setting | None:
    """The known setting a flag spelling belongs to (`-tp`, `--max_model_len=...`), or None."""
    name = flag.split("=", 1)[0]
    if name.startswith("--"):
        name = "--" + name[2:].replace("_", "-")
    for setting in _SETTINGS:
        spellings = {
            s if not s.startswith("--") else "--" + s[2:].replace("_", "-")
            for s in flag_spellings(setting)
        }
        if name in spellings:
            return setting
    return None


_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([kKmMgGtT])?(i?[bB])?")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """Bytes from `3221225472`, `3G`/`3K` (binary, as vLLM reads them), `3g`/`3k`
    (decimal, as vLLM), `3GiB` (binary) or `3GB` (decimal). Raises ValueError."""
    m = _SIZE_RE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a size: {text!r}")
    number, suffix, unit = m.groups()
    if suffix is None:
        if unit and unit.lower() != "b":
            raise ValueError(f"not a size: {text!r}")
        if "." in number:
            raise ValueError(f"not a whole number of bytes: {text!r}")
        return int(number)
    letter = suffix.lower()
    if unit is None:
        # vLLM's human_readable_int: upper-case suffix is binary, lower-case decimal.
        binary = suffix.isupper()
    else:
        binary = unit.lower() == "ib"
    mult = _BINARY[letter] if binary else _DECIMAL[letter]
    return int(round(float(number) * mult))


def parse_count(text: str) -> int:
    """An integer token count: `4096`, or vLLM's `128k` (x1000) / `128K` (x1024)."""
    t = text.strip()
    if re.fullmatch(r"[+-]?\d+", t):
        return int(t)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG])", t)
    if not m:
        raise ValueError(f"not an integer: {text!r}")
    number, suffix = m.groups()
    if suffix.isupper():
        if "." in number:
            raise ValueError(f"decimals are not allowed with binary suffix: {text!r}")
        return int(number) * _BINARY[suffix.lower()]
    return int(float(number) * _DECIMAL[suffix])


def is_json_object(text: str) -> bool:
    """Whether `text` is a JSON object (what vLLM's JSON-valued flags take)."""
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def known_keys() -> list[str]:
    """Every setting name this tool knows, sorted."""
    return sorted(SETTINGS)

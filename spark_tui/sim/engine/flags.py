"""vLLM's command line, as the simulated engine accepts it.

The top-level parser is `vllm` with the real subcommands, so an unknown flag fails exactly as
vLLM does: argparse prints the top-level usage and `vllm: error: unrecognized arguments: ...`
and exits 2. The serve flags are real vLLM's, read from its `--help=all` (`help_table`), in
that order (the "non-default args" log line lists them so). Like vLLM's FlexibleArgumentParser,
`--flag_name` is read as `--flag-name`; sizes accept vLLM's human-readable integers.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any, Callable, Optional

from spark_tui.sim.engine import VERSION
from spark_tui.sim.engine.help_table import HelpFlag, real_flags

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


# Spellings of the GB10 images' vLLM (0.28) that a bundled recipe still passes, and -O, which
# vLLM 0.32 reads as the compilation level without listing it: the stand-in takes them too.
OLDER_SPELLINGS: dict[str, tuple[str, ...]] = {
    "kv_cache_memory_bytes": ("--kv-cache-memory",),
    "compilation_config": ("-O",),
}
# A flag of vLLM 0.28 that 0.32 removed (recipes/qwen3.8-flash-next.yaml passes it).
OLDER_FLAGS: list[HelpFlag] = [
    HelpFlag(("--gdn-decode-kernel",), "gdn_decode_kernel", "str", "auto", None, "KernelConfig"),
]

Spec = tuple[tuple[str, ...], str, str, Any, Optional[Sequence[str]]]


def _specs() -> list[Spec]:
    out: list[Spec] = []
    for f in [*real_flags(), *OLDER_FLAGS]:
        names = f.names + OLDER_SPELLINGS.get(f.dest, ())
        out.append((names, f.dest, f.kind, f.default, f.choices))
    return out


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


def _add(parser: argparse.ArgumentParser, spec: Spec) -> None:
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
        if kind == "int" and choices:
            choices = [int(c) for c in choices]
        if isinstance(default, str) and kind not in ("str", "ostr"):
            # argparse converts a string default: the help's repr of a config object
            # (`EPLBConfig(...)`) is no value the stand-in reads.
            try:
                default = _TYPES[kind](default)
            except (ValueError, argparse.ArgumentTypeError):
                default = None
        parser.add_argument(*flags, dest=dest, type=_TYPES[kind], default=default, choices=choices)


def serve_arguments() -> list[Spec]:
    """Every serve flag spec, in the order of real vLLM's help (its sections in vLLM's order;
    within one, alphabetical as the help lists them)."""
    return _specs()


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
    """The default of every serve flag, as the parser holds it."""
    args = vars(build_parser().parse_args(["serve"]))
    out: dict[str, Any] = {"model_tag": None}
    for _flags, dest, _kind, _default, _choices in serve_arguments():
        out[dest] = args[dest]
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

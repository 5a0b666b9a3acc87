"""Real vLLM's serve flags, read from its own `vllm serve --help=all` (shipped beside this
module as `vllm-<release>-serve-help-all.txt`, captured from the lab's real install).

Standard library only: the stand-in runs on a bare python3 inside container images. The help
gives each flag's spellings, whether it takes one value, several or none, its `--no-` form,
its choices and its default; the kind of value (int, float, JSON, a size) follows from the
default and the help's own words, except for the few flags whose default (None) says nothing
and whose value the stand-in reads: `KINDS` names those.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_tui.sim.engine import RELEASE

HELP_FILE = Path(__file__).resolve().parent / f"vllm-{RELEASE}-serve-help-all.txt"

# Value kinds the help cannot tell (a None default, or an action it does not show).
KINDS: dict[str, str] = {
    "api_server_count": "int",
    "block_size": "int",
    "compilation_config": "comp",
    "data_parallel_rank": "int",
    "data_parallel_rpc_port": "int",
    "data_parallel_size_local": "int",
    "data_parallel_start_rank": "int",
    "kv_cache_memory_bytes": "hint",
    "max_model_len": "hint_auto",
    "max_num_batched_tokens": "hint",
    "max_num_seqs": "int",
    "middleware": "append",
}

_GROUP = re.compile(r"^(\S[^:]*):$")
_OPTION = re.compile(r"^  (-\S.*?)(?:\s{2,}(\S.*))?$")
_DEFAULT = re.compile(r"\(default: (.*)\)\s*$", re.S)
_CHOICES = re.compile(r"^\{([^}]*)\}$")


@dataclass(frozen=True)
class HelpFlag:
    """One serve flag as real vLLM's help shows it."""

    names: tuple[str, ...]  # its spellings, the `--no-` form excluded
    dest: str
    kind: str  # str, ostr, int, float, hint, hint_auto, json, comp, bool, true, list, append
    default: Any
    choices: tuple[str, ...] | None
    group: str


def _literal(text: str) -> Any:
    """A default as the help prints it (Python's repr), as a value."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare string: `auto`, `assistant`


def _kind(dest: str, value: str, default: Any, words: str) -> str:
    if dest in KINDS:
        return KINDS[dest]
    if "JSON" in words:
        return "json"
    if "human-readable" in words:
        return "hint"
    if isinstance(default, bool) or default is None:
        return "ostr"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, (list, dict)):
        return "json"
    return "str"


def _flag(header: str, words: str, group: str) -> HelpFlag | None:
    names: list[str] = []
    negatable = False
    takes = ""
    for spelling in re.split(r", (?=-)", header):  # not inside `['auto', 'hf']`
        name, _, rest = spelling.partition(" ")
        if name.startswith("--no-"):
            negatable = True
            continue
        names.append(name)
        takes = takes or rest
    if not names or names[0] == "-h":
        return None
    long = next((n for n in names if n.startswith("--")), names[0])
    dest = long.lstrip("-").replace("-", "_")
    found = _DEFAULT.search(words)
    default = _literal(found.group(1).strip()) if found else None
    choices = None
    if negatable:
        kind = "bool"
    elif not takes:
        kind, default = "true", bool(default)
    elif "..." in takes:
        kind = "list"
    else:
        listed = _CHOICES.match(takes)
        if listed:
            choices = tuple(listed.group(1).split(","))
            kind = "int" if all(c.isdigit() for c in choices) else "str"
        else:
            kind = _kind(dest, takes, default, words)
    return HelpFlag(tuple(names), dest, kind, default, choices, group)


def read_help(text: str) -> list[HelpFlag]:
    """Every serve flag in the help's order (its sections in vLLM's order)."""
    flags: list[HelpFlag] = []
    group = ""
    header: str | None = None
    words: list[str] = []

    def close() -> None:
        if header is not None:
            spec = _flag(header, " ".join(words), group)
            if spec is not None:
                flags.append(spec)

    for line in text.splitlines():
        if line.startswith("#"):
            continue
        heading = _GROUP.match(line)
        option = _OPTION.match(line)
        if heading or option:
            close()
            header, words = None, []
        if heading:
            group = heading.group(1)
            if group.startswith("When passing JSON"):
                break  # the notes after the last section
        elif option and group != "positional arguments":
            header = option.group(1)
            words = [option.group(2) or ""]
        elif header is not None and line.strip():
            words.append(line.strip())
    close()
    return flags


def real_flags() -> list[HelpFlag]:
    """The flags of the vLLM release the stand-in follows."""
    return read_help(HELP_FILE.read_text(encoding="utf-8"))

"""The flags an image's `vllm serve` accepts, read from its `vllm serve --help=all` text, and
the check of a rendered command against them (unknown flags, values outside a flag's choices).

argparse prints each option as an "invocation" at two spaces of indent, e.g.
`  --dtype {auto,bfloat16,float,float16,float32,half}`, `  --enforce-eager, --no-enforce-eager`
or `  --api-server-count API_SERVER_COUNT, -asc API_SERVER_COUNT`, followed (on the same line
after two or more spaces, or on the next lines) by the help. vLLM's parser also reads
`--flag_name` as `--flag-name`, `--flag=value`, and `--json-flag.key value` for its JSON
config flags; the check accepts those spellings as vLLM does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# An option line: two spaces, a dash, then the invocation up to two spaces or the line's end.
_OPTION_LINE = re.compile(r"^  (-[^\s].*?)(?:\s{2,}(.*))?$")
_DEFAULT = re.compile(r"\(default: (.*)\)\s*$")


@dataclass(frozen=True)
class FlagSpec:
    """One option: its spellings, whether it takes a value, its choices (None: any)."""

    names: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...] | None = None
    nargs_many: bool = False

    @property
    def name(self) -> str:
        longs = [n for n in self.names if n.startswith("--") and not n.startswith("--no-")]
        return longs[0] if longs else self.names[0]


@dataclass(frozen=True)
class FlagProblem:
    """A flag the image's vLLM would refuse: kind "unknown" or "choice"."""

    kind: str
    flag: str
    value: str | None = None
    choices: tuple[str, ...] = ()
    suggestion: str | None = None


# Flags a mod adds to the image's vLLM when it runs before `vllm serve` (the image's own
# help text does not list them): eugr's gpu-mem-util-gb patches in the budget in GiB.
MOD_FLAGS: dict[str, tuple[FlagSpec, ...]] = {
    "gpu-mem-util-gb": (FlagSpec(("--gpu-memory-utilization-gb",), takes_value=True),),
}


@dataclass
class FlagTable:
    """Every option of one `vllm serve`, by each of its spellings."""

    flags: dict[str, FlagSpec] = field(default_factory=dict)
    version: str | None = None

    def __len__(self) -> int:
        return len({id(s) for s in self.flags.values()})

    def with_mods(self, mods: Sequence[str]) -> FlagTable:
        """The table as the serve command meets it once these mods (folder names) ran."""
        added = [spec for mod in mods for spec in MOD_FLAGS.get(mod, ())]
        if not added:
            return self
        flags = dict(self.flags)
        for spec in added:
            for name in spec.names:
                flags.setdefault(name, spec)
        return FlagTable(flags, self.version)

    def lookup(self, name: str) -> FlagSpec | None:
        """The option spelled `name` (underscores read as dashes, as vLLM does)."""
        if name in self.flags:
            return self.flags[name]
        if name.startswith("--"):
            return self.flags.get("--" + name[2:].replace("_", "-"))
        return None

    def check(self, argv: Sequence[str]) -> list[FlagProblem]:
        """Problems in a `vllm serve ...` argv (the words after `serve`, or the whole
        command starting with `vllm serve`): unknown flags, values outside the choices."""
        words = list(argv)
        if len(words) >= 2 and words[0].rsplit("/", 1)[-1] == "vllm" and words[1] == "serve":
            words = words[2:]
        problems: list[FlagProblem] = []
        i = 0
        while i < len(words):
            word = words[i]
            i += 1
            if not word.startswith("-") or word == "-" or _is_number(word):
                continue
            if word.startswith("-O") and not word.startswith("--"):
                # vLLM reads -O3, -O=3 and `-O 3` as --optimization-level.
                if word == "-O" and i < len(words) and words[i] in ("0", "1", "2", "3"):
                    i += 1
                if self.lookup("--optimization-level") is not None:
                    continue
            name, eq, inline = word.partition("=")
            spec = self.lookup(name)
            if spec is None and "." in name:
                # `--speculative-config.method ngram`: a key of a JSON config flag.
                base = self.lookup(name.split(".", 1)[0])
                if base is not None and base.takes_value:
                    if not eq and i < len(words):
                        i += 1
                    continue
            if spec is None:
                problems.append(FlagProblem("unknown", name, suggestion=self._suggest(name)))
                continue
            if not spec.takes_value:
                continue
            values: list[str] = []
            if eq:
                values = [inline]
            elif spec.nargs_many:
                while i < len(words) and not words[i].startswith("--"):
                    values.append(words[i])
                    i += 1
            elif i < len(words):
                values = [words[i]]
                i += 1
            if spec.choices is not None and not self._plugin_may_add(spec, words):
                for v in values:
                    if v not in spec.choices:
                        problems.append(FlagProblem("choice", name, v, spec.choices))
        return problems

    @staticmethod
    def _plugin_may_add(spec: FlagSpec, words: list[str]) -> bool:
        """A --tool-parser-plugin (or reasoning parser plugin) registers more parser names."""
        if spec.name == "--tool-call-parser":
            return any(w.split("=", 1)[0] in ("--tool-parser-plugin",) for w in words)
        if spec.name == "--reasoning-parser":
            return any(w.split("=", 1)[0] == "--reasoning-parser-plugin" for w in words)
        return False

    def _suggest(self, name: str) -> str | None:
        import difflib

        norm = "--" + name.lstrip("-").replace("_", "-")
        longs = sorted({k for k in self.flags if k.startswith("--")})
        close = difflib.get_close_matches(norm, longs, n=1, cutoff=0.75)
        return close[0] if close else None


def _is_number(word: str) -> bool:
    return re.fullmatch(r"-\d+(\.\d+)?", word) is not None


def _split_invocation(text: str) -> list[str]:
    """`-a A, --bee {x,y}` -> ["-a A", "--bee {x,y}"] (commas inside braces kept)."""
    parts: list[str] = []
    depth = 0
    cur = ""
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _spec(invocation: str) -> FlagSpec | None:
    names: list[str] = []
    takes_value = False
    choices: tuple[str, ...] | None = None
    many = False
    for part in _split_invocation(invocation):
        bits = part.split(" ", 1)
        if not bits[0].startswith("-"):
            return None
        names.append(bits[0])
        if len(bits) > 1:
            takes_value = True
            meta = bits[1].strip()
            many = many or "..." in meta
            m = re.match(r"^\{([^}]*)\}", meta)
            if m:
                choices = tuple(c.strip() for c in m.group(1).split(",") if c.strip())
    if not names:
        return None
    return FlagSpec(tuple(names), takes_value, choices, many)


def parse_help(text: str) -> FlagTable:
    """The flag table of a `vllm serve --help=all` output."""
    table = FlagTable()
    for line in text.splitlines():
        m = _OPTION_LINE.match(line)
        if not m:
            continue
        spec = _spec(m.group(1).strip())
        if spec is None:
            continue
        for name in spec.names:
            table.flags.setdefault(name, spec)
    if not any(n.startswith("--") for n in table.flags):
        raise ValueError("no options found: this is not `vllm serve --help=all` output")
    return table


def describe(problem: FlagProblem, image: str) -> tuple[str, str]:
    """(message, remedy) of a problem, naming the flag and the image."""
    if problem.kind == "unknown":
        hint = f" (did you mean {problem.suggestion}?)" if problem.suggestion else ""
        return (
            f"{problem.flag} is not a flag of the vLLM in {image}: it would stop with "
            f"`vllm: error: unrecognized arguments: {problem.flag}`{hint}",
            f"remove {problem.flag} from the recipe's command, or use an image whose vLLM "
            "has it (`vllm serve --help=all` in the image lists its flags)",
        )
    allowed = ", ".join(problem.choices)
    return (
        f"{problem.flag} {problem.value!r} is not one of its choices in the vLLM of "
        f"{image}: {allowed}",
        f"set {problem.flag} to one of: {allowed}",
    )

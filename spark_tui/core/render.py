"""Render a recipe's command template and settings into an argv list (never a shell string)."""

from __future__ import annotations

import json
import re
import shlex
import string
from collections.abc import Mapping, Sequence
from typing import Any

from spark_tui.core import settings_schema as schema
from spark_tui.core.errors import RecipeError
from spark_tui.core.recipe import Recipe, require_vllm

# `{key}` but not the v1 escape `{{key}}` (a literal brace pair around a word).
PLACEHOLDER_RE = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A backslash-newline is a line continuation, as in a shell: it joins two lines.
_CONTINUATION_RE = re.compile(r"\\\r?\n")
_FORMATTER = string.Formatter()
_ESCAPE_REMEDY = (
    "a command that doubles literal braces is read as Python's str.format reads it (as "
    "sparkrun does): write every literal brace doubled ({{ and }}) and placeholders as {key}"
)

# One piece of a template token: literal text, then a placeholder name (or None) and the
# str.format spec written after it (`!r`, `:>5`; empty for a plain `{key}`).
Piece = tuple[str, str | None, str]


def uses_escapes(command: str, recipe_version: str = "2") -> bool:
    """Whether a command is read as a str.format template, where `{{`/`}}` are literal braces.

    v1 commands went through str.format; a v2 command that doubles a brace asks for the same.
    Plain JSON like {"a":{"b":1}} has no `{{` and is left as written.
    """
    return recipe_version == "1" or "{{" in (command or "")


def template_pieces(text: str, escapes: bool, where: str = "recipe") -> list[Piece]:
    """The pieces of a template text: as str.format parses it (escapes) or by `{key}` alone."""
    if not escapes:
        out: list[Piece] = []
        pos = 0
        for m in PLACEHOLDER_RE.finditer(text):
            out.append((text[pos : m.start()], m.group(1), ""))
            pos = m.end()
        if pos < len(text) or not out:
            out.append((text[pos:], None, ""))
        return out
    try:
        parsed = list(_FORMATTER.parse(text))
    except ValueError as exc:
        raise RecipeError(
            f"{where}: `command:` is not a valid template ({exc})", _ESCAPE_REMEDY
        ) from None
    pieces: list[Piece] = []
    for literal, name, spec, conversion in parsed:
        if name is None:
            pieces.append((literal, None, ""))
            continue
        if not _NAME_RE.fullmatch(name):
            raise RecipeError(
                f"{where}: `{{{name}}}` in `command:` is not a placeholder name", _ESCAPE_REMEDY
            )
        fmt = (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
        pieces.append((literal, name, fmt))
    return pieces or [("", None, "")]


def placeholders(command: str, escapes: bool | None = None) -> list[str]:
    """The `{key}` placeholders of a command template, in order of first use.

    `escapes` None decides from the text (a `{{` asks for str.format reading); a malformed
    template lists the placeholders before the fault (rendering it names the fault).
    """
    text = command or ""
    if escapes is None:
        escapes = uses_escapes(text)
    if not escapes:
        return list(dict.fromkeys(PLACEHOLDER_RE.findall(text)))
    names: list[str] = []
    try:
        for _literal, name, _spec, _conv in _FORMATTER.parse(text):
            if name is not None and _NAME_RE.fullmatch(name):
                names.append(name)
    except ValueError:
        pass
    return list(dict.fromkeys(names))


def recipe_placeholders(recipe: Recipe) -> list[str]:
    """The placeholders of a recipe's command, read as its version reads them."""
    return placeholders(recipe.command, uses_escapes(recipe.command, recipe.recipe_version))


def split_command(command: str, recipe_name: str = "recipe") -> list[str]:
    """Split a command template into tokens as a POSIX shell would (quotes, continuations)."""
    try:
        return shlex.split(_CONTINUATION_RE.sub(" ", command), comments=True)
    except ValueError as exc:
        raise RecipeError(
            f"{recipe_name}: the command template cannot be split into arguments ({exc})",
            "check the quotes in `command:`; JSON values go inside single quotes",
        ) from None


def value_text(value: Any) -> str:
    """How one setting value is written as a single argv element."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return json.dumps(dict(value), separators=(",", ":"))
    if isinstance(value, list | tuple):
        return json.dumps(list(value), separators=(",", ":"))
    return str(value)


def _builtin(recipe: Recipe, key: str) -> Any:
    return {
        "model": recipe.model,
        "model_revision": recipe.model_revision,
        "container": recipe.container,
        "name": recipe.name,
    }.get(key)


def _formatted(value: Any, fmt: str, recipe: Recipe, key: str) -> str:
    if not fmt:
        return value_text(value)
    try:
        return ("{0" + fmt + "}").format(value)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise RecipeError(
            f"{recipe.name}: placeholder {{{key}{fmt}}} cannot format {value!r} ({exc})",
            f"write the placeholder as {{{key}}}",
        ) from None


def _substitute(pieces: list[Piece], values: Mapping[str, Any], recipe: Recipe) -> str | None:
    """One template token with its placeholders filled; None when a removed value empties it."""
    out: list[str] = []
    removed = False
    whole = len(pieces) == 1 and pieces[0][0] == "" and pieces[0][1] is not None
    for literal, key, fmt in pieces:
        out.append(literal)
        if key is None:
            continue
        if key in values:
            value = values[key]
        elif key in schema.BUILTIN_PLACEHOLDERS and _builtin(recipe, key) is not None:
            value = _builtin(recipe, key)
        else:
            raise RecipeError(
                f"{recipe.name}: placeholder {{{key}}} in `command:` has no value",
                f"add `{key}: <value>` under `defaults:` in the recipe, or pass --set {key}=VALUE",
            )
        if value is None:
            removed = True
        else:
            out.append(_formatted(value, fmt, recipe, key))
    if removed and (whole or re.fullmatch(r"-[^=]+=", "".join(out))):
        return None
    return "".join(out)


def render_template(recipe: Recipe, settings: Mapping[str, Any]) -> list[str]:
    """The command template split and its placeholders substituted, nothing else applied.

    Read as str.format reads it when the recipe uses brace escapes (see uses_escapes).
    """
    escapes = uses_escapes(recipe.command, recipe.recipe_version)
    out: list[str] = []
    for token in split_command(recipe.command, recipe.name):
        pieces = template_pieces(token, escapes, recipe.name)
        if all(key is None for _, key, _ in pieces):
            out.append("".join(literal for literal, _, _ in pieces))
            continue
        text = _substitute(pieces, settings, recipe)
        if text is None:
            # A removed value takes its flag with it: `--tool-call-parser {p}` -> nothing.
            whole = len(pieces) == 1 and pieces[0][0] == ""
            if whole and out and _is_flag(out[-1]) and len(out) > 2:
                out.pop()
            continue
        out.append(text)
    return out


def _is_flag(token: str) -> bool:
    return token.startswith("-") and not _is_number(token)


def _is_number(token: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?([eE][+-]?\d+)?", token) is not None


def _occurrences(argv: Sequence[str], setting: schema.Setting) -> list[tuple[int, int, str]]:
    """(start, end, spelling) of every place the flag (or its `--no-` form) appears."""
    spellings = set(schema.flag_spellings(setting))
    negative = setting.negative_flag if setting.kind == "bool" else None
    found: list[tuple[int, int, str]] = []
    i = 2  # argv[0:2] is `vllm serve`
    while i < len(argv):
        token = argv[i]
        name = token.split("=", 1)[0] if token.startswith("-") else ""
        if name in spellings or (negative is not None and name == negative):
            end = i + 1
            if "=" not in token and setting.kind != "bool":
                if setting.multi_value:
                    while end < len(argv) and not _is_flag(argv[end]):
                        end += 1
                elif end < len(argv) and not _is_flag(argv[end]):
                    end += 1
            found.append((i, end, name))
            i = end
        else:
            i += 1
    return found


def _replacement(setting: schema.Setting, value: Any, spelling: str, eq_form: bool) -> list[str]:
    if setting.kind == "bool":
        if value is True:
            return [setting.flag]
        if value is False and setting.negatable and setting.vllm_default is True:
            return [setting.negative_flag]
        return []
    if value is None:
        return []
    name = spelling if spelling != setting.negative_flag else setting.flag
    if setting.multi_value and isinstance(value, list | tuple):
        return [name, *(value_text(v) for v in value)]
    if eq_form:
        return [f"{name}={value_text(value)}"]
    return [name, value_text(value)]


def apply_flag(argv: list[str], setting: schema.Setting, value: Any) -> list[str]:
    """argv with one setting's flag replaced, appended or removed; never duplicated."""
    found = _occurrences(argv, setting)
    if not found:
        return argv + _replacement(setting, value, setting.flag, eq_form=False)
    start, end, spelling = found[0]
    eq_form = "=" in argv[start]
    new = _replacement(setting, value, spelling, eq_form)
    out = list(argv[:start]) + new
    pos = end
    for s, e, _ in found[1:]:
        out += argv[pos:s]
        pos = e
    out += argv[pos:]
    return out


def render_argv(recipe: Recipe, settings: Mapping[str, Any]) -> list[str]:
    """The serve command as an argv list starting with `vllm`.

    Placeholders are substituted per token, so a value is always exactly one argv element.
    Every other setting that maps to a vLLM flag replaces the flag's hard-coded value,
    is appended when absent, or removes the flag when None/false. Rank and rendezvous
    flags are left to the launch plan.
    """
    require_vllm(recipe)  # an sglang recipe is refused as such, not as a bad command
    argv = render_template(recipe, settings)
    if not argv or argv[0] != "vllm":
        first = argv[0] if argv else "(empty)"
        raise RecipeError(
            f"{recipe.name}: the command starts with {first!r}, not `vllm serve`",
            "write the command as `vllm serve {model} --flag value ...`",
        )
    used = set(recipe_placeholders(recipe))
    for key, value in settings.items():
        setting = schema.get(key)
        if key in used or setting is None or setting.plan_managed:
            continue
        if _default_size_left_out(argv, setting, value):
            continue
        argv = apply_flag(argv, setting, value)
    return argv


def _default_size_left_out(argv: Sequence[str], setting: schema.Setting, value: Any) -> bool:
    """A size at vLLM's own default (`tensor_parallel: 1`) that the command does not write:
    adding `--tensor-parallel-size 1` would change nothing but the serve flags (sparkrun
    adds none either). A value the template writes is still replaced."""
    if setting.kind != "int" or setting.vllm_default is None or isinstance(value, bool):
        return False
    return value == setting.vllm_default and not _occurrences(argv, setting)


def render_env(recipe: Recipe) -> dict[str, str]:
    """The recipe's environment as strings (values kept literal: `${NAME}` stays a reference)."""
    env: dict[str, str] = {}
    for key, value in recipe.env.items():
        if value is None:
            env[str(key)] = ""
        elif isinstance(value, bool):
            env[str(key)] = "true" if value else "false"
        else:
            env[str(key)] = str(value)
    return env


def placeholder_flags(command: str, escapes: bool) -> dict[str, str]:
    """The flag each placeholder is the value of (`--flag {key}` or `--flag={key}`); a
    placeholder inside a larger value (JSON, a path) feeds no flag of its own."""
    try:
        tokens = split_command(command)
        out: dict[str, str] = {}
        for i, token in enumerate(tokens):
            flag, eq, value = token.partition("=")
            if eq and token.startswith("-"):
                pieces = template_pieces(value, escapes)
                owner = flag
            else:
                pieces = template_pieces(token, escapes)
                owner = tokens[i - 1] if i > 0 and _is_flag(tokens[i - 1]) else ""
            whole = len(pieces) == 1 and pieces[0][0] == "" and pieces[0][1] is not None
            if owner and whole and pieces[0][1] not in out:
                out[str(pieces[0][1])] = owner
        return out
    except RecipeError:
        return {}  # rendering names the fault


def value_setting(key: str, fed_flag: str | None) -> schema.Setting | None:
    """The setting whose type and range a value of `key` must meet: the one of the flag it
    feeds in the command (`gpu_memory_utilization: 108` feeding the mod's
    `--gpu-memory-utilization-gb` is GiB, not a fraction); the key's own when it feeds none.
    A flag this tool does not know leaves the value to the flag's own program."""
    own = schema.get(key)
    if fed_flag is None:
        return own
    if own is not None and fed_flag in schema.flag_spellings(own):
        return own
    return schema.for_flag(fed_flag)


def recipe_value_setting(recipe: Recipe, key: str) -> schema.Setting | None:
    """value_setting for a key of this recipe."""
    escapes = uses_escapes(recipe.command, recipe.recipe_version)
    return value_setting(key, placeholder_flags(recipe.command, escapes).get(key))


def template_value(recipe: Recipe, key: str) -> Any:
    """What the command template itself sets for a known setting that is not a placeholder:
    the hard-coded flag value, True/False for a bare boolean flag or its `--no-` form, or None."""
    setting = schema.get(key)
    if setting is None or key in recipe_placeholders(recipe):
        return None
    try:
        argv = split_command(recipe.command, recipe.name)
    except RecipeError:
        return None
    found = _occurrences(argv, setting)
    if not found:
        return None
    start, end, spelling = found[-1]  # the last one counts, as in vLLM's argparse
    if setting.kind == "bool":
        return spelling != setting.negative_flag
    token = argv[start]
    if "=" in token:
        return token.split("=", 1)[1]
    return argv[start + 1] if end > start + 1 else None


def flag_value(argv: Sequence[str], flag: str, *aliases: str) -> str | None:
    """The value given to `flag` (or one of its `aliases`) in argv (`--flag v` or
    `--flag=v`), or None. The last one counts, as in vLLM's argparse."""
    names = (flag, *aliases)
    found = None
    for i, token in enumerate(argv):
        if token in names and i + 1 < len(argv):
            found = argv[i + 1]
        elif token.split("=", 1)[0] in names and "=" in token:
            found = token.split("=", 1)[1]
    return found


def switch_value(argv: Sequence[str], setting: schema.Setting) -> bool | None:
    """What argv sets a boolean setting to: True for its flag, False for the `--no-` form,
    the last one counting as in vLLM's argparse; None when neither is there."""
    spellings = schema.flag_spellings(setting)
    found = None
    for token in argv:
        if token in spellings:
            found = True
        elif token == setting.negative_flag:
            found = False
    return found


def has_flag(argv: Sequence[str], flag: str) -> bool:
    """Whether argv carries `flag` (bare, with a value, or in `--flag=v` form)."""
    return any(t == flag or t.startswith(flag + "=") for t in argv)

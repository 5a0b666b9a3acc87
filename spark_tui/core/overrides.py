"""`--set key=value` overrides: parsed, typed and validated on top of a recipe's defaults."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from spark_tui.core import settings_schema as schema
from spark_tui.core.errors import OverrideError
from spark_tui.core.recipe import Recipe
from spark_tui.core.render import (
    placeholder_flags,
    recipe_placeholders,
    template_value,
    uses_escapes,
    value_setting,
)
from spark_tui.core.serve_rules import DEPENDENCIES

_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TRUE = {"true", "on", "yes", "1"}
_FALSE = {"false", "off", "no", "0"}
_REMOVE = {"none", "null", ""}
# Counts vLLM itself accepts in its human-readable form (128k, 32K).
_HUMAN_COUNTS = {"max_model_len", "max_num_batched_tokens"}


def parse_set(item: str) -> tuple[str, str]:
    """Split one `--set key=value` into (key, value); `max-num-seqs` is read as `max_num_seqs`."""
    if "=" not in item:
        raise OverrideError(
            f"--set {item!r} is not of the form KEY=VALUE",
            "write it as --set key=value, e.g. --set max_num_seqs=8",
        )
    key, value = item.split("=", 1)
    key = key.strip().lstrip("-").replace("-", "_")
    if not _KEY_RE.fullmatch(key):
        raise OverrideError(
            f"--set {item!r}: {key!r} is not a setting name",
            "setting names are words like max_num_seqs or gpu_memory_utilization",
        )
    return key, value.strip()


def valid_keys(recipe: Recipe) -> list[str]:
    """The keys `--set` accepts for this recipe: its defaults, its placeholders, known settings."""
    keys = set(recipe.defaults) | set(schema.SETTINGS)
    keys |= {p for p in recipe_placeholders(recipe) if p not in schema.BUILTIN_PLACEHOLDERS}
    return sorted(keys)


def apply_overrides(recipe: Recipe, sets: list[str] | Mapping[str, Any]) -> dict[str, Any]:
    """The effective settings: the recipe's defaults with the overrides typed and applied.

    A key set to none/null/empty maps to None, which `render_argv` reads as "remove this
    flag"; a boolean set to false removes (or negates) its flag. Callers reading numbers
    should treat None as absent.
    """
    pairs: list[tuple[str, Any]]
    if isinstance(sets, Mapping):
        pairs = list(sets.items())
    else:
        pairs = [parse_set(item) for item in sets]
    settings: dict[str, Any] = dict(recipe.defaults)
    allowed = set(valid_keys(recipe))
    fed = placeholder_flags(recipe.command, uses_escapes(recipe.command, recipe.recipe_version))
    pairs = [(_recipe_key(key, allowed, fed), raw) for key, raw in pairs]
    for key, raw in pairs:
        if key in schema.BUILTIN_PLACEHOLDERS:
            raise OverrideError(
                f"--set {key}=...: {key!r} comes from the recipe itself, it is not a setting",
                f"edit the recipe's `{key}:` field (or copy the recipe to your recipes folder)",
            )
        if key not in allowed:
            import difflib  # only for a key that is not there

            close = difflib.get_close_matches(key, sorted(allowed), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise OverrideError(
                f"--set {key}={raw}: unknown setting {key!r}{hint}",
                "use one of: " + ", ".join(sorted(allowed)),
            )
        settings[key] = coerce_value(key, raw, recipe.defaults.get(key), fed_flag=fed.get(key))
    explicit = {key: settings[key] for key, _ in pairs}
    _keep_dependencies(recipe, settings, explicit)
    return settings


def _recipe_key(key: str, allowed: set[str], fed: Mapping[str, str]) -> str:
    """The recipe key a `--set` name means: itself when the recipe or this tool knows it, else
    the one vLLM's serve flag of that name takes its value from (`tensor_parallel_size` ->
    the placeholder feeding `-tp`, else `tensor_parallel`)."""
    if key in allowed:
        return key
    flag = "--" + key.replace("_", "-")
    setting = schema.for_flag(flag)
    for placeholder, fed_flag in fed.items():
        same = fed_flag.replace("_", "-") == flag
        if same or (setting is not None and schema.for_flag(fed_flag) is setting):
            return placeholder
    return setting.key if setting is not None else key


def _is_on(recipe: Recipe, settings: Mapping[str, Any], key: str) -> bool:
    """Whether the rendered command will carry `key`: a set value, or the template's own."""
    if key in settings:
        return settings[key] is not None and settings[key] is not False
    value = template_value(recipe, key)
    return value is not None and value is not False


def _keep_dependencies(
    recipe: Recipe, settings: dict[str, Any], explicit: Mapping[str, Any]
) -> None:
    """Remove a setting together with the one it needs, or refuse a pair vLLM would refuse.

    Removing tool_call_parser also turns enable_auto_tool_choice off (vLLM stops at
    startup with the one and not the other); asking for both on and off is refused.
    """
    for dep in DEPENDENCIES:
        wants = explicit.get(dep.setting)
        needed_on = _is_on(recipe, settings, dep.needs)
        if needed_on:
            continue
        if wants is True:
            how = (
                f"--set {dep.needs}=none removes {dep.needs}"
                if dep.needs in explicit
                else f"the recipe sets no {dep.needs}"
            )
            raise OverrideError(
                f"--set {dep.setting}=true needs {dep.needs}, but {how} "
                f"(vLLM would stop with: {dep.vllm_error})",
                f"also give --set {dep.needs}=<parser> (e.g. {dep.example}), or leave "
                f"{dep.setting} off",
            )
        if dep.needs in explicit and wants is None and _is_on(recipe, settings, dep.setting):
            # The pair goes together: the user asked to remove what the other one needs.
            settings[dep.setting] = False


def _kind_of(setting: schema.Setting | None, default: Any) -> str:
    if setting is not None:
        return setting.kind
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, Mapping):
        return "json"
    return "str"


def _accepted(setting: schema.Setting | None, kind: str) -> str:
    if setting is not None:
        return setting.accepted_form()
    return {
        "bool": "true or false",
        "int": "an integer",
        "float": "a number",
        "json": "a JSON object",
    }.get(kind, "a string")


def coerce_value(key: str, raw: Any, default: Any = None, *, fed_flag: str | None = None) -> Any:
    """Type and range-check one value for `key`: as the flag it feeds in the command
    (`fed_flag`) takes it, else as the known setting `key`, else as the recipe default's type."""
    setting = value_setting(key, fed_flag)
    kind = _kind_of(setting, default)
    accepted = _accepted(setting, kind)
    if setting is not None and setting.key != key:
        accepted += f" (it is the value of {fed_flag})"

    def bad(reason: str) -> OverrideError:
        removable = setting is None or setting.removable
        return OverrideError(
            f"--set {key}={raw!s}: {reason}; {key} takes {accepted}",
            f"give {key} {accepted}" + ("; or none to remove it" if removable else ""),
        )

    if raw is None or (isinstance(raw, str) and raw.strip().lower() in _REMOVE):
        if setting is not None and not setting.removable:
            raise bad("this setting cannot be removed")
        return None

    value: Any
    if kind == "bool":
        value = _to_bool(raw)
        if value is None:
            raise bad(f"{raw!r} is not a boolean")
        return value
    if kind == "int":
        if setting is not None and _is_word(raw, setting):
            return str(raw).strip().lower() if isinstance(raw, str) else raw
        value = _to_int(raw, human=(setting.key if setting else key) in _HUMAN_COUNTS)
        if value is None:
            raise bad(f"{raw!r} is not an integer")
    elif kind == "float":
        value = _to_float(raw)
        if value is None:
            raise bad(f"{raw!r} is not a number")
    elif kind == "size":
        value = _to_size(raw)
        if value is None:
            raise bad(f"{raw!r} is not a byte size")
        if value < 1:
            raise bad("the size must be at least 1 byte")
        if value > schema.MAX_BYTES:
            raise bad(f"{value} bytes is out of range")
        return value
    elif kind == "json":
        return _to_json(raw, bad)
    elif kind == "choice":
        text = str(raw).strip()
        assert setting is not None  # only known settings have choices
        match = next((c for c in setting.choices if c.lower() == text.lower()), None)
        if match is None:
            raise bad(f"{text!r} is not one of the accepted values")
        return match
    else:
        if not isinstance(raw, str | int | float) or isinstance(raw, bool):
            raise bad("expected a string")
        text = str(raw)
        if "\x00" in text:
            raise bad("the value contains a NUL byte")
        if text.startswith("-"):
            # vLLM's parser would read it as another option, not as this one's value.
            raise bad("a value may not start with '-'")
        return text

    if setting is not None:
        _check_range(value, setting, bad)
    return value


def _is_word(raw: Any, setting: schema.Setting) -> bool:
    """Whether raw is one of the words (or special numbers) the setting's flag takes."""
    if isinstance(raw, bool):
        return False
    return str(raw).strip().lower() in setting.words


def _check_range(value: float, setting: schema.Setting, bad: Any) -> None:
    lo, hi = setting.minimum, setting.maximum
    if lo is not None and (value <= lo if setting.exclusive_minimum else value < lo):
        raise bad(f"{value} is out of range")
    if hi is not None and value > hi:
        raise bad(f"{value} is out of range")


def _to_bool(raw: Any) -> bool | None:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return None


def _to_int(raw: Any, human: bool) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        return int(raw) if raw.is_integer() else None
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if human:
        try:
            return schema.parse_count(text)
        except ValueError:
            return None
    return None


def _to_float(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str) and re.fullmatch(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", raw):
        value = float(raw)
    else:
        return None
    return value if math.isfinite(value) else None


def _to_size(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        return schema.parse_size(raw)
    except ValueError:
        return None


def _to_json(raw: Any, bad: Any) -> str:
    if isinstance(raw, Mapping):
        return json.dumps(dict(raw), separators=(",", ":"))
    if not isinstance(raw, str):
        raise bad("expected a JSON object")
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise bad(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(parsed, dict):
        raise bad("expected a JSON object")
    return raw


def settings_diff(
    base: Mapping[str, Any], new: Mapping[str, Any], recipe: Recipe | None = None
) -> dict[str, tuple[Any, Any]]:
    """The settings whose value differs: key -> (old, new).

    A key one side lacks reads as None, or, when `recipe` is given, as the value the recipe's
    command hard-codes for that flag (so removing `--tool-call-parser glm47` shows as
    ("glm47", None)). Absent and explicitly removed (None) differ only when that value does.
    """
    diff: dict[str, tuple[Any, Any]] = {}
    for key in list(base) + [k for k in new if k not in base]:
        old = base[key] if key in base else _template_value(recipe, key)
        cur = new[key] if key in new else _template_value(recipe, key)
        if old != cur or (type(old) is not type(cur) and not _same_number(old, cur)):
            diff[key] = (old, cur)
    return diff


def _template_value(recipe: Recipe | None, key: str) -> Any:
    if recipe is None:
        return None
    return template_value(recipe, key)


def _same_number(a: Any, b: Any) -> bool:
    numeric = (int, float)
    return (
        isinstance(a, numeric)
        and isinstance(b, numeric)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
        and a == b
    )

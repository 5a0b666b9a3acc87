"""The check tuning needs from a launch: does every rank's command carry the change?

The tuning loop itself (one change, relaunch, check, smoke, benchmark, compare) is
`spark_tui.service.tune`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from spark_tui.core import settings_schema
from spark_tui.core.render import flag_value, has_flag, switch_value, value_text


def _setting(name: str, value: Any) -> settings_schema.Setting:
    known = settings_schema.get(name)
    if known is not None:
        return known
    kind = "bool" if isinstance(value, bool) else "str"
    return settings_schema.Setting(key=name, kind=kind, flag="--" + name.replace("_", "-"))


def carries(argv: Sequence[str], setting: settings_schema.Setting, value: Any) -> bool:
    """Whether vLLM, parsing argv, ends up with `setting` = `value`.

    None (a removed setting) is the flag's absence; a boolean is the last of its flag or
    `--no-` form, else vLLM's default (off when unknown); any other value is the last value
    given, as vLLM's argparse reads it.
    """
    spellings = settings_schema.flag_spellings(setting)
    if value is None:
        return not any(has_flag(argv, name) for name in spellings)
    if isinstance(value, bool):
        given = switch_value(argv, setting)
        if given is None:
            given = bool(setting.vllm_default)
        return given is value
    given_text = flag_value(argv, *spellings)
    if given_text is None and type(setting.vllm_default) is int:
        return bool(value == setting.vllm_default)  # a size the command leaves at vLLM's default
    return given_text == value_text(value)


def ranks_carry(plan: Mapping[str, Any], setting: str, value: Any) -> list[int]:
    """The ranks whose serve argv does NOT carry `setting` = `value` (empty when all do)."""
    known = _setting(setting, value)
    wrong = []
    for rank in plan.get("ranks") or []:
        argv = [str(a) for a in rank.get("argv") or []]
        if not carries(argv, known, value):
            wrong.append(int(rank.get("rank", 0)))
    return wrong

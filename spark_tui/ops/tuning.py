"""The check tuning needs from a launch: does every rank's command carry the change?

The tuning loop itself (one change, relaunch, check, smoke, benchmark, compare) is
`spark_tui.service.tune`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_tui.core.render import has_flag


def _flag_for(setting: str) -> str:
    from spark_tui.core import settings_schema

    known = settings_schema.get(setting)
    return known.flag if known else "--" + setting.replace("_", "-")


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def ranks_carry(plan: Mapping[str, Any], setting: str, value: Any) -> list[int]:
    """The ranks whose serve argv does NOT carry `setting` = `value` (empty when all do).

    Booleans are checked as flag presence, None (a removed setting) as the flag's absence,
    other values as the flag's argument.
    """
    flag = _flag_for(setting)
    wrong = []
    for rank in plan.get("ranks") or []:
        argv = [str(a) for a in rank.get("argv") or []]
        if value is None:
            ok = not has_flag(argv, flag)
        elif isinstance(value, bool):
            present = flag in argv
            ok = present == value or ("--no-" + flag[2:] in argv) == (not value)
        else:
            got = None
            for i, tok in enumerate(argv):
                if tok == flag and i + 1 < len(argv):
                    got = argv[i + 1]
                elif tok.startswith(flag + "="):
                    got = tok.split("=", 1)[1]
            ok = got == _value_text(value)
        if not ok:
            wrong.append(int(rank.get("rank", 0)))
    return wrong

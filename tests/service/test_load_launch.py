"""Session.load_launch loads the launch's code (its action, Docker, HTTP, the history's
records) that discovery and the fit panel do not, so the cockpit can load it while the user
picks a recipe. In a fresh interpreter, so nothing another test imported can hide it."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import asyncio, json, sys
from spark_tui.service.session import LAUNCH_CODE, Session
heavy = ("docker", "httpx", "pydantic.main")
def loaded():
    return [m for m in (*LAUNCH_CODE, *heavy) if m in sys.modules]
before = loaded()
asyncio.run(Session([]).load_launch())
print(json.dumps([before, loaded()]))
"""


def test_load_launch_loads_what_a_launch_imports() -> None:
    from spark_tui.service.session import LAUNCH_CODE

    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    before, after = json.loads(out.stdout)
    assert before == [], before
    assert after == [*LAUNCH_CODE, "docker", "httpx", "pydantic.main"], after

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


CRITICAL = """
import json, sys
from spark_tui.service.session import LAUNCH_CODE
import spark_tui.remote.probe, spark_tui.service.ssh_nodes, spark_tui.ops.image_flags
for name in LAUNCH_CODE:
    __import__(name)
print(json.dumps([m for m in ("httpx", "pydantic") if m in sys.modules]))
"""


def test_the_code_a_launch_needs_for_its_containers_loads_no_http_client_nor_records() -> None:
    # httpx and pydantic's models (the API's client, the history's records) took about
    # a quarter of a second of the CPU before the head's container on a 2-core machine;
    # a launch loads them once its ranks run (READY_CODE).
    out = subprocess.run(
        [sys.executable, "-c", CRITICAL], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(out.stdout) == []

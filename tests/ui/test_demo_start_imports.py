"""What the demo cockpit loads before its first frame stays what the first frame needs: not
the run history's pydantic models, the benchmark's HTTP client, SSH or the Docker SDK, the
fit model, the launch plan, the event types, the log panes, the sync view, the main screen's
flows (launch, stop, measure, tune, sweep, history, log views), the dialogs or the palette's
entries (each probe in a fresh interpreter, so nothing another test imported can hide an
import). Every spark-tui module the first frame imports is compiled at each start of a
fresh checkout."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

# Each costs the first frame a good part of a minimal Textual app's whole start.
LATER = (
    "pydantic.main",
    "spark_tui.ops.history",
    "httpx",
    "asyncssh",
    "docker",
    "spark_tui.core.fit",
    "spark_tui.ops.events",
    "spark_tui.service.events",
    "spark_tui.service.sync",
    "spark_tui.service.evaluate",
    "spark_tui.core.plan",
    "spark_tui.core.render",
    "spark_tui.core.serve_args",
    "spark_tui.core.inventory",
    "spark_tui.service.targets",
    "spark_tui.service.nodes",
    "spark_tui.ui.widgets.logpane",
    "spark_tui.ui.widgets.sync",
    "spark_tui.core.wiring",
    "spark_tui.core.link",
    "spark_tui.ui.flows.launch",
    "spark_tui.ui.flows.stop",
    "spark_tui.ui.flows.measure",
    "spark_tui.ui.flows.tune",
    "spark_tui.ui.flows.sweep",
    "spark_tui.ui.flows.history",
    "spark_tui.ui.flows.logview",
    "spark_tui.ui.flows.clusters",
    "spark_tui.ui.screens.dialogs",
    "spark_tui.ui.palette",
    "spark_tui.ui.widgets.filterbox",
    "spark_tui.ui.widgets.raystate",
    "spark_tui.commands.terminal",
    "spark_tui.ui.routing",
    "spark_tui.ui.messages",
    "spark_tui.service.logs",
    "spark_tui.ui.widgets.result_lines",
    "spark_tui.ui.widgets.gauge_lines",
    "spark_tui.service.recipe_nodes",
    "spark_tui.core.recipe",
    "spark_tui.ui.widgets.link_lines",
    "spark_tui.ui.quitting",
    "spark_tui.ui.widgets.node_lines",
    # The bundled themes are Python; recipes and the config file load it later.
    "yaml",
)

# Every spark-tui module the first frame imports (compiled at each start of a fresh checkout).
FIRST_FRAME = [
    "spark_tui",
    "spark_tui.cli",
    "spark_tui.commands",
    "spark_tui.commands.demo",
    "spark_tui.commands.shortcuts",
    "spark_tui.commands.tty",
    "spark_tui.core",
    "spark_tui.core.errors",
    "spark_tui.core.ports",
    "spark_tui.core.timeouts",
    "spark_tui.service",
    "spark_tui.service.api",
    "spark_tui.service.cluster",
    "spark_tui.service.discover",
    "spark_tui.service.endpoint",
    "spark_tui.service.event_stream",
    "spark_tui.service.pump",
    "spark_tui.service.session",
    "spark_tui.service.ssh_nodes",
    "spark_tui.ui",
    "spark_tui.ui.app",
    "spark_tui.ui.bundled_themes",
    "spark_tui.ui.config",
    "spark_tui.ui.demo_app",
    "spark_tui.ui.demo_session",
    "spark_tui.ui.driver",
    "spark_tui.ui.paths",
    "spark_tui.ui.runner",
    "spark_tui.ui.screens",
    "spark_tui.ui.screens.main",
    "spark_tui.ui.themes",
    "spark_tui.ui.widgets",
    "spark_tui.ui.widgets.fitpanel",
    "spark_tui.ui.widgets.gauges",
    "spark_tui.ui.widgets.link",
    "spark_tui.ui.widgets.nodes",
    "spark_tui.ui.widgets.rankpanes",
    "spark_tui.ui.widgets.recipes",
    "spark_tui.ui.widgets.results",
    "spark_tui.ui.workers",
]

# A module imported to be loaded on first use (importlib's LazyLoader) is in sys.modules as
# a subclass of ModuleType until it has run.
PROBE = """
import json, sys, types
def loaded(name):
    return type(sys.modules.get(name)) is types.ModuleType
{code}
print(json.dumps(sorted(m for m in {later!r} if loaded(m))))
print(json.dumps(sorted(m for m in list(sys.modules) if m.startswith("spark_tui") and loaded(m))))
"""

# `spark-tui demo` up to its first frame: the CLI and the demo command, then the app and its
# session built.
DEMO = """
import spark_tui.cli
import spark_tui.commands.demo
import spark_tui.commands.tty
from spark_tui.ui.runner import run_cockpit
from spark_tui.ui.demo_app import demo_app
app = demo_app(nodes=2, memory_gb=128, recipe=None, theme=None, pace=0.5, token_scale=1.0)
"""


def probe(code: str) -> tuple[list[str], list[str]]:
    """(the names of LATER loaded, every spark-tui module loaded) after `code` runs."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code, later=LATER)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    later, ours = result.stdout.splitlines()[-2:]
    return list(json.loads(later)), list(json.loads(ours))


def loaded_after(code: str) -> list[str]:
    return probe(code)[0]


def test_the_demo_app_and_session_load_none_of_it() -> None:
    assert loaded_after(DEMO) == []


def test_the_first_frame_compiles_only_the_modules_listed() -> None:
    assert probe(DEMO)[1] == FIRST_FRAME


def test_a_user_theme_loads_yaml(tmp_path: Path) -> None:
    # The probe sees PyYAML when a theme needs it (the user's themes are read at start too).
    themes = tmp_path / "spark-tui" / "themes"
    themes.mkdir(parents=True)
    (themes / "flow.yaml").write_text("name: flow\nprimary: '#76B900'\nvariables: {}\n")
    code = f"import os\nos.environ['XDG_CONFIG_HOME'] = {str(tmp_path)!r}\n" + DEMO
    assert "yaml" in loaded_after(code)


@pytest.mark.parametrize("name", LATER)
def test_each_name_kept_out_is_a_module(name: str) -> None:
    # A misspelt or moved module would be "not loaded" for ever.
    assert importlib.util.find_spec(name) is not None


def test_the_plan_loads_when_a_recipe_is_evaluated() -> None:
    loaded = loaded_after(DEMO + "from spark_tui.service.evaluate import load_recipes\n")
    assert "spark_tui.service.evaluate" in loaded and "spark_tui.core.plan" in loaded


def test_the_event_types_load_when_first_used() -> None:
    loaded = loaded_after(DEMO + "from spark_tui.service import events as ev\nev.Notice\n")
    assert "spark_tui.service.events" in loaded and "spark_tui.ops.events" in loaded


def test_the_demo_history_loads_it_when_first_used() -> None:
    # The probe above could not pass by looking at the wrong names: the demo's history is
    # still there, opened on first use.
    loaded = loaded_after(DEMO + "app.session.history.list_runs()\n")
    assert "spark_tui.ops.history" in loaded and "pydantic.main" in loaded


# The nodes panel alone in an App, drawn (a resize, a focus change) before any probe returns.
NODES_PANEL = """
import asyncio
from textual.app import App
from spark_tui.ui.widgets.nodes import NodePanel
class One(App):
    def compose(self):
        yield NodePanel()
async def main():
    async with One().run_test() as pilot:
        await pilot.press("tab")
{then}
asyncio.run(main())
"""


def test_the_nodes_panel_drawn_before_any_probe_loads_neither_its_lines_nor_wiring() -> None:
    # There is no node to draw and no cabling to work out yet.
    loaded = loaded_after(DEMO + NODES_PANEL.format(then=""))
    assert "spark_tui.ui.widgets.node_lines" not in loaded
    assert "spark_tui.core.wiring" not in loaded

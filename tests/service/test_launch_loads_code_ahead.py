"""A headless launch loads the launch's code (Session.load_launch: its operations and their
Docker client) in a thread while the nodes are reached and probed, not when its ranks are
about to start (a fifth of a second before the head's container was made, on a busy
machine); what only a running cluster needs (the API's HTTP client, the history's records)
loads once the ranks have started. Real Session over simulated Sparks; the steps are
recorded at their public seams."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.remote import probe as probe_module
from spark_tui.service import events as ev
from spark_tui.service.session import LAUNCH_CODE, Session
from spark_tui.service.ssh_nodes import SshNodes
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base


async def test_a_headless_launch_loads_its_code_while_probing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    steps: list[str] = []
    load, probe, start = Session.load_launch, probe_module.probe_pool, SshNodes.launch

    async def loading(self: Session, code: Sequence[str] = LAUNCH_CODE) -> None:
        what = "load" if tuple(code) == LAUNCH_CODE else "ready load"
        steps.append(f"{what} begun")
        await load(self, code)
        steps.append(f"{what} ended")

    async def probing(*a: Any, **kw: Any) -> Any:
        steps.append("probe begun")
        return await probe(*a, **kw)

    async def starting(self: SshNodes, *a: Any, **kw: Any) -> None:
        steps.append("ranks")
        await start(self, *a, **kw)

    monkeypatch.setattr(Session, "load_launch", loading)
    monkeypatch.setattr(probe_module, "probe_pool", probing)
    monkeypatch.setattr(SshNodes, "launch", starting)
    recipe = find_recipe("glm-5.3-flash")
    scenario = Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(), pace=0.02)
    async with SimCluster(scenario) as sim:
        session = Session(sim.inventory)
        try:
            async for event in session.launch(
                recipe, {}, insist=True, wait_ready=False, follow=False
            ):
                if isinstance(event, ev.Question):
                    event.reply(True)
            async for _event in session.stop():
                pass
        finally:
            await session.close()
    assert "load begun" in steps, "the launch's code was not loaded ahead"
    assert steps.index("load begun") < steps.index("probe begun")
    assert steps.index("load ended") < steps.index("ranks")
    # What only a running cluster needs (the API's client, the history's records) loads
    # once the ranks have started, not before the head's container.
    assert steps.index("ranks") < steps.index("ready load begun"), steps

"""A headless launch loads the launch's code (Session.load_launch: its operations, Docker
and HTTP clients, the history's records) in a thread while the nodes are reached and
probed, not when its ranks are about to start (a fifth of a second before the head's
container was made, on a busy machine). Real Session over simulated Sparks; the steps are
recorded at their public seams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.remote import probe as probe_module
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.service.ssh_nodes import SshNodes
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base


async def test_a_headless_launch_loads_its_code_while_probing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    steps: list[str] = []
    load, probe, start = Session.load_launch, probe_module.probe_pool, SshNodes.launch

    async def loading(self: Session) -> None:
        steps.append("load begun")
        await load(self)
        steps.append("loaded")

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
    assert steps.index("loaded") < steps.index("ranks")

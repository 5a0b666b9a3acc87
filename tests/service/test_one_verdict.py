"""One verdict everywhere: for the same recipe and nodes, `spark-tui check`, the cockpit's
fit panel and the evaluation a launch makes (its Evaluated event) say the same thing.

The nodes are SIMULATED Sparks (spark_tui.sim.nodes: real SSH, a Docker API subset, the
stand-in engine), the Hub a SIMULATED one on loopback reached through HF_ENDPOINT, as
`spark-tui sim` and tests/remote/test_hub.py use them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_tui import cli
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.sim.hub import SimulatedHub, catalogue_repo
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base
from spark_tui.ui.app import SparkApp
from spark_tui.ui.widgets.fitpanel import FitPanel
from spark_tui.ui.widgets.recipes import RecipePanel

# A model in the simulated catalogue that no simulated node caches (they hold the bundled
# recipes' models), in the image every simulated node has.
MODEL = "Qwen/Qwen3-8B"
IMAGE = "nvcr.io/nvidia/vllm:26.05.post1-py3"
RECIPE = "hub-only"
ONE_NODE = "gpt-oss-120b"


@pytest.fixture
def user_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user recipe folder holding RECIPE, and this machine's caches kept in tmp_path."""
    config = tmp_path / "config"
    folder = config / "spark-tui" / "recipes"
    folder.mkdir(parents=True)
    recipe = {
        "recipe_version": "2",
        "name": RECIPE,
        "model": MODEL,
        "runtime": "vllm",
        "container": IMAGE,
        "min_nodes": 1,
        "max_nodes": 1,
        "defaults": {"port": 8000, "max_model_len": 32768},
        "command": "vllm serve {model} --port {port} --max-model-len {max_model_len}",
    }
    (folder / f"{RECIPE}.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return folder


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimulatedHub]:
    with SimulatedHub([catalogue_repo(MODEL)]) as running:
        monkeypatch.setenv("HF_ENDPOINT", running.endpoint)
        yield running


async def wait_until(pilot: Any, condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        await pilot.pause(0.05)


def check_verdict(sim: SimCluster, recipe: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    code = cli.main(["check", recipe, "--inventory", str(sim.inventory_path), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return str(json.loads(out)["verdict"])


async def fit_panel_verdict(sim: SimCluster, recipe: str) -> tuple[str, str]:
    """The cockpit's fit panel for `recipe` once its facts are in (the Hub's come in the
    background), and its recipe row's badge."""
    session = Session(sim.inventory)
    app = SparkApp(session, recipe=recipe, auto_refresh=False, handle_signals=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 60, "discovery")
        panel = app.main.query_one(FitPanel)

        def settled() -> bool:
            report = panel.report
            codes = {f["code"] for f in (report or {}).get("findings", [])}
            return report is not None and "hub_pending" not in codes

        await wait_until(pilot, settled, 60, "the fit panel's facts")
        rows = app.main.query_one(RecipePanel).rows
        row = next(r.verdict for r in rows if r.recipe.name == recipe)
        assert panel.report is not None
        return str(panel.report["verdict"]), str(row)


async def launch_verdict(sim: SimCluster, recipe: str) -> str:
    """The verdict a launch evaluates (its Evaluated event); the launch goes no further."""
    session = Session(sim.inventory)
    try:
        events = session.launch(find_recipe(recipe), {}, replace=True, follow=False)
        async for event in events:
            if isinstance(event, ev.Question):
                event.reply(False)
            if isinstance(event, ev.Evaluated):
                assert event.evaluation.verdict is not None
                await events.aclose()  # type: ignore[attr-defined]
                return event.evaluation.verdict
    finally:
        await session.close()
    raise AssertionError("the launch made no evaluation")


async def verdicts(sim: SimCluster, recipe: str, capsys: Any) -> dict[str, str]:
    check = await asyncio.to_thread(check_verdict, sim, recipe, capsys)
    panel, row = await fit_panel_verdict(sim, recipe)
    launch = await launch_verdict(sim, recipe)
    return {"check": check, "fit panel": panel, "recipe row": row, "launch": launch}


def one_node() -> Scenario:
    return Scenario(nodes=1, ssh_port=0, base_address=random_loopback_base(1), pace=0.02)


async def test_a_model_only_the_hub_knows_gets_one_verdict(
    user_dirs: Path, hub: SimulatedHub, capsys: pytest.CaptureFixture[str]
) -> None:
    async with SimCluster(one_node()) as sim:
        seen = await verdicts(sim, RECIPE, capsys)
    # The Hub's facts fit; the model is on no node yet (vLLM would download it): a warning.
    assert set(seen.values()) == {"fits_with_warnings"}, seen
    assert any(r.method == "GET" and "config.json" in r.path for r in hub.requests)


async def test_offline_the_cache_answers_the_same_everywhere(
    user_dirs: Path, hub: SimulatedHub, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    async with SimCluster(one_node()) as sim:
        online = await asyncio.to_thread(check_verdict, sim, RECIPE, capsys)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        asked = len(hub.requests)
        seen = await verdicts(sim, RECIPE, capsys)
    assert online == "fits_with_warnings"
    # Offline, vLLM cannot fetch the model the node lacks: every interface refuses it.
    assert set(seen.values()) == {"does_not_fit"}, seen
    assert len(hub.requests) == asked, "offline, only this machine's cache answers"


async def test_our_running_cluster_is_counted_once_the_same_way(
    user_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with SimCluster(one_node()) as sim:
        inventory = str(sim.inventory_path)
        started = await asyncio.to_thread(
            cli.main,
            ["launch", ONE_NODE, "--inventory", inventory, "--wait", "--ready-timeout", "60"],
        )
        assert started == 0, capsys.readouterr().err
        check = await asyncio.to_thread(check_verdict, sim, ONE_NODE, capsys)
        panel, row = await fit_panel_verdict(sim, ONE_NODE)
        launch = await launch_verdict(sim, ONE_NODE)
    seen = {"check": check, "fit panel": panel, "recipe row": row, "launch": launch}
    # A second copy fits only because the running one's memory is counted as a launch
    # replacing it gets it back.
    assert set(seen.values()) == {"fits"}, seen

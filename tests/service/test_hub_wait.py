"""Waiting for the Hub: `check` and a headless launch say what they wait for and how long at
most, once; a Hub that never answers ends the wait with a remedy that repeats the user's own
command; `plan` never waits. The Hub is the SIMULATED one on loopback (HF_ENDPOINT), made
slow (`delay`) or silent (`hold`)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from spark_tui import cli
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.service.targets import Targets
from spark_tui.sim.hub import SimulatedHub, catalogue_repo
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base
from tests.cli.conftest import MEM_128, node_entry

MODEL = "Qwen/Qwen3-8B"
IMAGE = "nvcr.io/nvidia/vllm:26.05.post1-py3"
RECIPE = "hub-only"
NOTE = f"reading the facts of {MODEL}@main from the Hub at "


@pytest.fixture
def user_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user recipe RECIPE whose model no node caches; this machine's caches in tmp_path."""
    folder = tmp_path / "config" / "spark-tui" / "recipes"
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
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("SPARK_TUI_HUB_TIMEOUT", raising=False)
    return folder


@pytest.fixture
def facts_file(tmp_path: Path) -> Path:
    """One GB10 that caches no model (so the fit needs the Hub), in a folder with a space."""
    node = node_entry("spark-a", "10.0.0.10", "enp1s0f1np1", "rocep1s0f1", "192.168.0.10", MEM_128)
    node["models"] = []
    path = tmp_path / "my facts" / "one node.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"nodes": [node]}))
    return path


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimulatedHub]:
    with SimulatedHub([catalogue_repo(MODEL)]) as running:
        monkeypatch.setenv("HF_ENDPOINT", running.endpoint)
        yield running


def test_check_says_once_what_it_waits_for_on_stderr_only(
    user_dirs: Path, facts_file: Path, hub: SimulatedHub, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.delay = 0.2  # a slow Hub: every request waits
    code = cli.main(["check", RECIPE, "--facts", str(facts_file), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["verdict"] == "fits_with_warnings"  # stdout is the JSON alone
    note = f"{NOTE}{hub.endpoint} (no node caches the model; at most 30 s)..."
    assert err.count(NOTE) == 1 and note in err, err


def test_a_hub_that_never_answers_ends_with_the_users_own_command(
    user_dirs: Path,
    facts_file: Path,
    hub: SimulatedHub,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPARK_TUI_HUB_TIMEOUT", "1")
    hub.hold()
    argv = ["check", RECIPE, "--set", "max_model_len=16384", "--facts", str(facts_file)]
    code = cli.main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert "at most 1 s" in err and hub.requests == []  # asked, never answered
    findings = {f["code"]: f for f in json.loads(out)["findings"]}
    assert code == 1 and "hub_unreachable" in findings, out
    found = findings["hub_unreachable"]
    assert f"did not answer within 1 s for {MODEL}@main" in found["message"]
    # The user gave a facts file: the remedy repeats it, not an inventory they never had.
    assert f"run `{shlex.join(['spark-tui', *argv])}` again" in found["remedy"], found
    assert "--inventory" not in found["remedy"]


def test_plan_never_waits_for_the_hub(
    user_dirs: Path, facts_file: Path, hub: SimulatedHub, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.hold()
    code = cli.main(["plan", RECIPE, "--facts", str(facts_file), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["model"] == MODEL
    assert hub.requests == [] and NOTE not in err


async def test_a_headless_launch_says_once_what_it_waits_for(
    user_dirs: Path, hub: SimulatedHub
) -> None:
    hub.delay = 0.2
    scenario = Scenario(nodes=1, ssh_port=0, base_address=random_loopback_base(1), pace=0.02)
    notes: list[str] = []
    async with SimCluster(scenario) as sim:
        session = Session(sim.inventory)
        try:
            events = session.launch(find_recipe(RECIPE), {}, replace=True, follow=False)
            async for event in events:
                if isinstance(event, ev.Question):
                    event.reply(False)
                elif isinstance(event, ev.Notice) and NOTE in event.message:
                    notes.append(event.message)
                elif isinstance(event, ev.Evaluated):
                    assert event.evaluation.verdict == "fits_with_warnings"
                    await events.aclose()  # type: ignore[attr-defined]
                    break
        finally:
            await session.close()
    assert notes == [f"{NOTE}{hub.endpoint} (no node caches the model; at most 30 s)..."]


@pytest.mark.parametrize(
    ("targets", "flags"),
    [
        (Targets(facts="/tmp/my facts.json"), "--facts '/tmp/my facts.json'"),
        (Targets(hosts="a,b", accept_new_host_keys=True), "--hosts a,b --accept-new-host-keys"),
        (Targets(hosts="a,b", hosts_file="~/hosts.txt"), "--hosts-file '~/hosts.txt'"),
        (Targets(hosts="a,b", sparkrun_cluster="lab"), "--sparkrun-cluster lab"),
        (Targets(inventory="/tmp/my lab.yaml"), "--inventory '/tmp/my lab.yaml'"),
    ],
)
def test_a_remedy_repeats_the_nodes_as_the_user_named_them(targets: Targets, flags: str) -> None:
    assert targets.as_flags() == flags
    assert targets.command("check", "my recipe") == f"spark-tui check 'my recipe' {flags}"


def test_a_command_that_needs_live_nodes_never_repeats_a_facts_file() -> None:
    assert Targets(facts="f.json").command("stop", live=True) == "spark-tui stop --inventory FILE"
    assert Targets(hosts="a").command("stop", live=True) == "spark-tui stop --hosts a"

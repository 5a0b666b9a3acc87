"""`--on NAME,NAME`: plan, check and launch on a subset of the inventory's simulated Sparks,
head first; without it the first nodes the layout needs are taken, and every command says
which ones, which are left out, and how to pick others."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.cli.conftest import Cli, SimProcess, running_sim

RECIPE = "glm-5.3-flash"  # TP 2: two of the three nodes


@pytest.fixture(scope="module")
def sim3(cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sim(cli, tmp_path_factory.mktemp("sim3"), nodes=3) as sim:
        yield sim


def _said(res: object) -> str:
    return f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"  # type: ignore[attr-defined]


def test_plan_without_on_names_the_first_nodes_taken_and_how_to_pick_others(
    cli: Cli, sim3: SimProcess
) -> None:
    res = cli.run("plan", RECIPE, "--inventory", str(sim3.inventory), timeout=90)
    assert res.returncode == 0, _said(res)
    assert "nodes     sim-spark-1, sim-spark-2   left out: sim-spark-3" in res.stdout, res.stdout
    note = next(line for line in res.stdout.splitlines() if "left out" in line and "note" in line)
    assert "(the first 2 nodes given)" in note and "--on sim-spark-3,sim-spark-1" in note, note


def test_check_on_runs_on_the_nodes_picked_head_first(cli: Cli, sim3: SimProcess) -> None:
    res = cli.run(
        "check",
        RECIPE,
        "--inventory",
        str(sim3.inventory),
        "--on",
        "sim-spark-3,sim-spark-1",
        "--json",
        timeout=90,
    )
    assert res.returncode == 0, _said(res)
    doc = json.loads(res.stdout)
    assert doc["nodes_used"] == ["sim-spark-3", "sim-spark-1"]
    assert doc["nodes_left_out"] == ["sim-spark-2"]
    assert [n["name"] for n in doc["nodes"]] == ["sim-spark-3", "sim-spark-1"]
    (left,) = [f for f in doc["findings"] if f["code"] == "nodes_left_out"]
    assert "runs on sim-spark-3, sim-spark-1 (as picked); left out: sim-spark-2" in left["message"]


@pytest.mark.parametrize(
    ("command", "on", "said"),
    [
        ("check", "sim-spark-1,sim-spark-9", "--on names sim-spark-9, which is not a node"),
        ("plan", "sim-spark-2,sim-spark-2", "--on names sim-spark-2 more than once"),
        ("launch", "spark-a,sim-spark-1", "--on names spark-a, which is not a node"),
    ],
)
def test_a_name_not_in_the_inventory_or_given_twice_is_refused_before_anything_runs(
    cli: Cli, sim3: SimProcess, command: str, on: str, said: str
) -> None:
    res = cli.run(command, RECIPE, "--inventory", str(sim3.inventory), "--on", on, timeout=90)
    assert res.returncode == 2, _said(res)
    message, remedy = res.stderr.strip().splitlines()[-2:]
    assert message.startswith(f"spark-tui: {said}"), res.stderr
    if "not a node" in said:
        assert remedy.endswith("sim-spark-1, sim-spark-2, sim-spark-3"), res.stderr
    else:
        assert remedy.startswith("  remedy: name every node once"), res.stderr
    assert "connecting" not in res.stderr, res.stderr


def test_launch_on_two_of_three_runs_there_head_first_and_leaves_the_third_alone(
    cli: Cli, sim3: SimProcess
) -> None:
    inventory = str(sim3.inventory)
    res = cli.run(
        "launch",
        RECIPE,
        "--inventory",
        inventory,
        "--on",
        "sim-spark-3,sim-spark-2",
        "--wait",
        timeout=120,
    )
    try:
        assert res.returncode == 0, _said(res)
        assert "connecting to 2 node(s)" in res.stderr, res.stderr
        assert "runs on sim-spark-3, sim-spark-2 (as picked); left out: sim-spark-1" in (
            res.stderr
        ), res.stderr
        assert "as cluster" in res.stderr and "on sim-spark-3, sim-spark-2\n" in res.stderr
        status = cli.run("status", "--inventory", inventory, "--json", timeout=60)
        assert status.returncode == 0, _said(status)
        (cluster,) = json.loads(status.stdout)["clusters"]
        ranks = [(r["rank"], r["node"]) for r in cluster["ranks"]]
        assert ranks == [(0, "sim-spark-3"), (1, "sim-spark-2")], status.stdout
    finally:
        stopped = cli.run("stop", "--inventory", inventory, timeout=60)
        assert stopped.returncode == 0, _said(stopped)


def test_on_given_to_a_command_about_a_running_cluster_names_the_commands_that_take_it(
    cli: Cli,
) -> None:
    res = cli.run("smoke", "--hosts", "spark-a,spark-b", "--on", "spark-a")
    assert res.returncode == 2, _said(res)
    message, remedy = res.stderr.strip().splitlines()[-2:]
    assert message == "spark-tui: `smoke` does not take --on", res.stderr
    assert "taken by check, plan, launch, tune" in remedy and "--cluster ID" in remedy, remedy

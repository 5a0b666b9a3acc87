"""Nodes on which no cluster of ours runs: every command that needs one gives the same answer,
exit 1 (a state of the nodes, not a usage error), with the launch that makes one, for the
nodes as the user named them; `status` and `stop` answer that nothing is there (exit 0)."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli, SimProcess

NEEDS_A_CLUSTER = {
    "smoke": ("smoke",),
    "bench": ("bench", "--concurrency", "1"),
    "watch": ("watch", "--interval", "0.2"),
    "logs": ("logs",),
    "logs --follow": ("logs", "--follow"),
    "tune": ("tune", "glm-5.3-flash", "--set", "max_num_seqs=4"),
}


@pytest.mark.parametrize("command", list(NEEDS_A_CLUSTER))
def test_a_command_that_needs_a_cluster_says_none_runs_and_how_to_launch_one(
    cli: Cli, sim: SimProcess, command: str
) -> None:
    res = cli.run(*NEEDS_A_CLUSTER[command], "--inventory", str(sim.inventory), timeout=90)
    said = res.stdout + res.stderr
    assert res.returncode == 1, said
    assert res.stderr.splitlines()[-2:] == [
        "spark-tui: no spark-tui cluster is running on these nodes",
        f"  remedy: launch one first: `spark-tui launch RECIPE --inventory {sim.inventory} --wait`",
    ], said
    assert "Traceback" not in said


@pytest.mark.parametrize("command", ["status", "stop"])
def test_status_and_stop_answer_that_nothing_is_there(
    cli: Cli, sim: SimProcess, command: str
) -> None:
    res = cli.run(command, "--inventory", str(sim.inventory), timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no spark-tui containers on these nodes" in res.stderr

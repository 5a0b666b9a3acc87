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


def test_a_cluster_whose_rank_exited_is_named_with_status_and_stop(
    cli: Cli, sim: SimProcess
) -> None:
    """Not "launch one first" (that launch would be refused: the cluster is still on its
    nodes) but which cluster is there, and the status and stop that deal with it."""
    import docker

    where = f"--inventory {sim.inventory}"
    launched = cli.run("launch", "glm-5.3-flash", *where.split(), "--wait", timeout=120)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    cluster = next(
        line.split()[1] for line in launched.stdout.splitlines() if line.startswith("cluster ")
    )

    def kill(rank: int) -> None:
        socket = sim.inventory.parent / "state" / "sockets" / f"{rank + 1}.docker.sock"
        client = docker.DockerClient(base_url=f"unix://{socket}", timeout=30)
        try:
            container = client.containers.get(f"spark-tui-{cluster}-r{rank}")
            if container.status == "running":  # the head may have ended on its own by now
                container.kill()
        finally:
            client.close()

    # The worker's engine dies (OOM-killed, a crash) and nothing has cleaned up yet: the head
    # still runs (and answers 503), then dies too (as vLLM's does when its peer is gone).
    try:
        for command in ("smoke", "bench", "tune"):
            if command == "smoke":
                kill(1)
            elif command == "bench":
                kill(0)
            res = cli.run(*NEEDS_A_CLUSTER[command], *where.split(), timeout=90)
            said = res.stdout + res.stderr
            assert res.returncode == 1 and "Traceback" not in said, said
            assert res.stderr.splitlines()[-2:] == [
                f"spark-tui: no spark-tui cluster is running on these nodes: cluster {cluster} "
                "of ours is there, but a rank of it exited",
                f"  remedy: `spark-tui status {where}` says which rank and why; "
                f"`spark-tui stop {where} --cluster {cluster}` removes it; then launch again: "
                f"`spark-tui launch RECIPE {where} --wait`",
            ], said
    finally:
        stopped = cli.run("stop", *where.split(), "--all", timeout=60)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def test_a_launch_without_wait_names_commands_that_work_as_typed(cli: Cli, sim: SimProcess) -> None:
    import re
    import shlex

    res = cli.run("launch", "glm-5.3-flash", "--inventory", str(sim.inventory), timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr
    said = re.search(r"follow it with `([^`]+)`; stop it with `([^`]+)`", res.stderr)
    assert said, res.stderr
    follow, stop = (shlex.split(c) for c in said.groups())
    assert follow[:3] == ["spark-tui", "logs", "--follow"] and str(sim.inventory) in follow
    stopped = cli.run(*stop[1:], timeout=60)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "removed spark-tui-" in stopped.stdout and "is left" in stopped.stderr


def test_a_stop_of_an_unknown_cluster_names_the_status_command_for_these_nodes(
    cli: Cli, sim: SimProcess
) -> None:
    """A command a message names runs as printed: with the nodes as the user named them."""
    res = cli.run("stop", "--inventory", str(sim.inventory), "--cluster", "0123abcd", timeout=60)
    said = res.stdout + res.stderr
    assert res.returncode == 0, said
    assert (
        "no spark-tui container of cluster 0123abcd on these nodes "
        f"(`spark-tui status --inventory {sim.inventory}` lists ours)"
    ) in res.stderr, said

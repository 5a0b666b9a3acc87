"""A rank that fails while `spark-tui watch` watches: as after a failed launch (and as the
cockpit does), every rank is stopped and removed, its last lines are kept in the history,
and the watch says so; `--keep-failed` leaves the ranks for inspection and prints the command
that removes them. On simulated Sparks whose worker's container is killed after ready."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import docker
import yaml

from tests.cli.conftest import Cli, SimProcess

RECIPE = "glm-5.3-flash"


def _said(res: subprocess.CompletedProcess[str]) -> str:
    return f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"


def _kill_the_worker(sim: SimProcess, cluster_id: str) -> None:
    """`docker kill` of rank 1's container, through the simulated node's Docker socket."""
    state = Path(yaml.safe_load(sim.inventory.read_text())["nodes"][1]["identity_file"]).parent
    client = docker.DockerClient(base_url=f"unix://{state / 'sockets' / '2.docker.sock'}")
    try:
        client.containers.get(f"spark-tui-{cluster_id}-r1").kill()
    finally:
        client.close()


def _launch_and_watch(cli: Cli, sim: SimProcess, *extra: str) -> tuple[str, str]:
    """Launch to ready, kill the worker, then watch: the cluster id and what the watch
    printed on stderr (its exit checked: 1)."""
    inv = str(sim.inventory)
    launched = cli.run("launch", RECIPE, "--inventory", inv, "--wait", timeout=120)
    assert launched.returncode == 0, _said(launched)
    (cluster_id,) = re.findall(r"cluster (\w+) ready", launched.stdout)
    _kill_the_worker(sim, cluster_id)
    watched = cli.run("watch", "--inventory", inv, "--interval", "0.3", *extra, timeout=120)
    assert watched.returncode == 1, _said(watched)
    assert "FAILED: rank 1 on sim-spark-2" in watched.stderr, _said(watched)
    return cluster_id, watched.stderr


def _status(cli: Cli, sim: SimProcess) -> list[dict[str, object]]:
    res = cli.run("status", "--inventory", str(sim.inventory), "--json", timeout=60)
    return list(json.loads(res.stdout)["clusters"])


def test_watch_stops_every_rank_and_keeps_their_lines_in_the_history(
    cli: Cli, sim: SimProcess
) -> None:
    cluster_id, said = _launch_and_watch(cli, sim)
    assert "clean up:" not in said, said
    assert f"removed spark-tui-{cluster_id}-r0 on sim-spark-1" in said, said
    assert (
        f"every rank of cluster {cluster_id} was stopped and removed; their last log lines "
        "are kept in the history"
    ) in said, said
    (kept,) = re.findall(r"  read them: spark-tui history show (\S+)", said)
    assert _status(cli, sim) == [], "nothing of the cluster is left"
    shown = cli.run("history", "show", kept, timeout=60)
    assert shown.returncode == 0, _said(shown)
    assert "failed after it was ready: rank 1 on sim-spark-2" in shown.stdout, shown.stdout
    logs = [Path(p) for p in re.findall(r"(/\S+rank\d-\S+\.log)", shown.stdout)]
    assert {p.name for p in logs} >= {"rank0-sim-spark-1.log", "rank1-sim-spark-2.log"}, logs
    assert all(p.read_text() for p in logs), "each kept log holds the rank's last lines"


def test_watch_keep_failed_leaves_the_ranks_and_prints_the_stop_command(
    cli: Cli, sim: SimProcess
) -> None:
    inv = str(sim.inventory)
    cluster_id, said = _launch_and_watch(cli, sim, "--keep-failed")
    try:
        assert f"clean up: spark-tui stop --inventory {inv}" in said, said
        assert f"the ranks of cluster {cluster_id} are kept for inspection" in said, said
        assert "removed " not in said, said
        (left,) = _status(cli, sim)
        assert left["cluster_id"] == cluster_id and left["state"] == "failed", left
    finally:
        stopped = cli.run("stop", "--inventory", inv, timeout=60)
        assert stopped.returncode == 0, _said(stopped)

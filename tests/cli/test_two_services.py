"""Two services side by side on 2 + 2 of four simulated Sparks, as a user drives them from
the shell: each launched from an inventory of its own two nodes, then seen, measured and
stopped through one inventory of all four. A command that needs one cluster and is not
told which names both and acts on neither; stopping one leaves the other serving; a launch
onto nodes the other runs on is refused (no terminal to ask) and leaves it alone; the fit
check counts as free only the memory of a cluster the launch would replace."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.conftest import Cli, SimProcess, running_sim

RECIPE = "glm-5.3-flash"
QUICK_BENCH = ("--concurrency", "1", "--prompt-tokens", "16", "--output-tokens", "4")


def _out(res: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit {res.returncode}\n--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr[-3000:]}"
    )


def _ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0 and "Traceback" not in res.stderr, _out(res)
    return res


def _json(res: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(_ok(res).stdout)


@pytest.fixture(scope="module")
def four(cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sim(cli, tmp_path_factory.mktemp("sim4"), nodes=4) as sim:
        yield sim


def _halves(sim: SimProcess) -> tuple[Path, Path]:
    """Two inventories of two nodes each, over the same four simulated Sparks."""
    nodes = yaml.safe_load(sim.inventory.read_text())["nodes"]
    paths = (sim.inventory.with_name("first.yaml"), sim.inventory.with_name("second.yaml"))
    for path, half in zip(paths, (nodes[:2], nodes[2:]), strict=True):
        path.write_text(yaml.safe_dump({"nodes": half}))
    return paths


def _status(cli: Cli, inventory: Path) -> dict[str, Any]:
    clusters = _json(cli.run("status", "--inventory", str(inventory), "--json"))["clusters"]
    return {c["cluster_id"]: c for c in clusters}


def _launched(cli: Cli, inventory: Path, *sets: str) -> str:
    return _launch_and_tunnel(cli, inventory, *sets)[0]


def _launch_and_tunnel(cli: Cli, inventory: Path, *sets: str) -> tuple[str, str]:
    """The cluster id a launch made ready and the tunnel command it printed."""
    res = _ok(
        cli.run("launch", RECIPE, "--inventory", str(inventory), *sets, "--wait", timeout=120)
    )
    ready = [line.split()[1] for line in res.stdout.splitlines() if line.startswith("cluster ")]
    tunnels = [
        line.split(": ", 1)[1] for line in res.stderr.splitlines() if "from your machine:" in line
    ]
    assert ready and tunnels, _out(res)
    return ready[0], tunnels[0]


def _refuses_unnamed(res: subprocess.CompletedProcess[str], ids: list[str]) -> None:
    """Exit 2, both clusters named, and `--cluster ID` for each as the remedy."""
    assert res.returncode == 2 and "Traceback" not in res.stderr, _out(res)
    assert "2 spark-tui clusters are on these nodes" in res.stderr, _out(res)
    for cid in ids:
        assert f"--cluster {cid}" in res.stderr, _out(res)


def test_two_services_on_two_plus_two_nodes(cli: Cli, four: SimProcess) -> None:
    every = four.inventory
    first, second = _halves(four)
    a = _launched(cli, first)
    b = _launched(cli, second)
    four.snapshot()
    assert a != b

    # status lists both, each on its own nodes, ready, with tunnels that can be open at once.
    clusters = _status(cli, every)
    assert set(clusters) == {a, b}
    nodes = {cid: [r["node"] for r in c["ranks"]] for cid, c in clusters.items()}
    assert not set(nodes[a]) & set(nodes[b]), nodes
    assert all(c["state"] == "ready" for c in clusters.values()), clusters
    ports = {c["endpoint"]["tunnel_port"] for c in clusters.values()}
    assert len(ports) == 2, clusters

    # Unnamed, a command that needs one cluster names both and touches neither.
    for words in (["smoke"], ["bench", *QUICK_BENCH], ["logs", "--tail", "1"], ["stop"]):
        _refuses_unnamed(cli.run(*words, "--inventory", str(every), timeout=60), [a, b])
    assert set(_status(cli, every)) == {a, b}

    # Named, each acts on the one chosen (the history says which cluster it measured).
    smoke = _json(cli.run("smoke", "--inventory", str(every), "--cluster", b, "--json"))
    bench = _json(
        cli.run("bench", "--inventory", str(every), "--cluster", a, *QUICK_BENCH, "--json")
    )
    runs = {r["id"]: r for r in _json(cli.run("history", "--json"))}
    assert smoke["ok"] and runs[smoke["run_id"]]["cluster_id"] == b
    assert runs[bench["run_id"]]["cluster_id"] == a

    # The fit check of a launch on the first two (free again later: a is there now) counts
    # a's memory free, since the launch replaces it, and never b's, which stays.
    check = _ok(cli.run("check", RECIPE, "--inventory", str(every), "--set", "max_num_seqs=4"))
    credited = [line for line in check.stdout.splitlines() if line.startswith("(counted")]
    assert credited and all(n in credited[0] for n in nodes[a]), _out(check)
    assert not any(n in credited[0] for n in nodes[b]), _out(check)
    plan = _ok(cli.run("plan", RECIPE, "--inventory", str(every), "--set", "max_num_seqs=4"))
    assert f"replaces cluster {a} of ours" in plan.stdout, _out(plan)
    assert f"cluster {b} of ours runs on beside it" in plan.stdout, _out(plan)

    # A launch onto b's nodes with other settings would replace b: with no terminal to ask,
    # refused, naming b, the ways out, and b serves on.
    res = cli.run("launch", RECIPE, "--inventory", str(second), "--set", "max_num_seqs=4")
    assert res.returncode == 1 and "Traceback" not in res.stderr, _out(res)
    assert (
        f"cluster {b}" in res.stderr and f"stop --inventory {second} --cluster {b}`" in res.stderr
    ), _out(res)
    assert "--replace" in res.stderr, _out(res)
    assert set(_status(cli, every)) == {a, b}

    # Stopping one leaves the other serving; with one left, no --cluster is needed.
    stopped = _ok(cli.run("stop", "--inventory", str(every), "--cluster", a, timeout=60))
    assert all(a in line for line in stopped.stdout.splitlines() if line.startswith("removed"))
    # What it checked again is said of a alone: b's containers are still there.
    assert f"no spark-tui container of cluster {a} is left" in stopped.stderr, _out(stopped)
    assert "no spark-tui container is left" not in stopped.stderr, _out(stopped)
    assert set(_status(cli, every)) == {b}
    smoke = _json(cli.run("smoke", "--inventory", str(every), "--json"))
    assert smoke["ok"]
    assert _json(cli.run("history", "--json"))[-1]["cluster_id"] == b

    _ok(cli.run("stop", "--inventory", str(every), "--all", timeout=60))
    assert _status(cli, every) == {}
    four.snapshot()


def test_two_services_picked_with_on_and_one_tuned_where_it_runs(
    cli: Cli, four: SimProcess
) -> None:
    every = str(four.inventory)
    names = [n["name"] for n in yaml.safe_load(four.inventory.read_text())["nodes"]]
    a, tunnel_a = _launch_and_tunnel(cli, four.inventory, "--on", ",".join(names[:2]))
    b, tunnel_b = _launch_and_tunnel(cli, four.inventory, "--on", ",".join(names[2:]))
    four.snapshot()
    clusters = _status(cli, four.inventory)
    assert set(clusters) == {a, b}
    assert [r["node"] for r in clusters[b]["ranks"]] == names[2:]
    # Each launch printed the tunnel `status` gives its cluster (a launch sees only its own
    # nodes): the first one opened from the launch's words stays open beside the second.
    assert tunnel_a != tunnel_b
    assert [clusters[a]["endpoint"]["tunnel"], clusters[b]["endpoint"]["tunnel"]] == [
        tunnel_a,
        tunnel_b,
    ]

    # Without --on the layout takes the first two nodes, a's: refused, naming it.
    res = cli.run("launch", RECIPE, "--inventory", every, "--set", "max_num_seqs=4")
    assert res.returncode == 1 and f"cluster {a}" in res.stderr, _out(res)
    assert b not in res.stderr.split("remedy")[0], _out(res)

    # tune --cluster b relaunches b where it runs, never on a's nodes.
    res = cli.run(
        "tune", RECIPE, "--inventory", every, "--cluster", b, "--set", "max_num_seqs=2",
        *QUICK_BENCH, "--requests-per-level", "1", "--json", timeout=240,
    )  # fmt: skip
    four.snapshot()
    assert res.returncode == 0, _out(res)
    clusters = _status(cli, four.inventory)
    assert set(clusters) == {a, b}
    assert [r["node"] for r in clusters[b]["ranks"]] == names[2:]
    assert all("--max-num-seqs 2" in " ".join(r["command"]) for r in clusters[b]["ranks"])
    assert not any("--max-num-seqs 2" in " ".join(r["command"]) for r in clusters[a]["ranks"])

    _ok(cli.run("stop", "--inventory", every, "--all", timeout=60))
    assert _status(cli, four.inventory) == {}

"""The headless CLI contract (DESIGN.md "Headless CLI contract", issues 2 to 5), as a user
sees it: `spark-tui` run in a subprocess, its output formats and its exit codes
(0 ok, 1 the thing checked failed, 2 usage or input error, 3 a node could not be reached)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.conftest import Cli, SimProcess, descendants

SECRET = "supersecret-xyz"
INJECTION = "x; rm -rf /"


def _out(res: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit {res.returncode}\n--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr[-3000:]}"
    )


def _json(res: subprocess.CompletedProcess[str]) -> Any:
    try:
        return json.loads(res.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"stdout is not JSON ({exc}):\n{_out(res)}") from None


def _usage_error(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2, a message naming the problem and a remedy line, no traceback."""
    assert res.returncode == 2, _out(res)
    assert "Traceback" not in res.stderr + res.stdout, _out(res)
    assert re.search(r"^\s*remedy: \S", res.stderr, re.M), _out(res)
    for needle in needles:
        assert needle in res.stderr, _out(res)


def _no_traceback(res: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in res.stderr + res.stdout, _out(res)


# --- recipes ---------------------------------------------------------------------------------


def test_recipes_json_lists_the_bundled_recipes(cli: Cli) -> None:
    res = cli.run("recipes", "--json")
    assert res.returncode == 0, _out(res)
    data = _json(res)
    assert isinstance(data, list)
    names = {r["name"] for r in data}
    assert {"glm-5.3-flash", "qwen3.8-flash-next"} <= names
    glm = next(r for r in data if r["name"] == "glm-5.3-flash")
    assert glm["model"] == "nvidia/GLM-5.3-Flash-FP4-Local"


def test_recipes_table(cli: Cli) -> None:
    res = cli.run("recipes")
    assert res.returncode == 0, _out(res)
    lines = res.stdout.splitlines()
    assert any(line.startswith("glm-5.3-flash ") for line in lines), _out(res)
    assert any(line.startswith("qwen3.8-flash-next ") for line in lines), _out(res)
    assert "nvidia/GLM-5.3-Flash-FP4-Local" in res.stdout
    # Within 80 columns: a recipe's model and runtime on an indented line under it.
    assert all(len(line) <= 80 for line in lines), _out(res)
    glm = lines.index(next(line for line in lines if line.startswith("glm-5.3-flash ")))
    assert lines[glm + 1].split() == ["nvidia/GLM-5.3-Flash-FP4-Local", "vllm-distributed"]


# --- check -----------------------------------------------------------------------------------

NODE_KEYS = {
    "name": str,
    "budget_bytes": int,
    "weights_bytes": int,
    "kv_budget_bytes": int,
    "kv_per_request_bytes": int,
    "max_concurrency": (int, float),
}


def _check_shape(data: dict[str, Any], names: list[str]) -> None:
    """The `check --json` format of issue 2 (extra keys are allowed)."""
    assert data["verdict"] in ("fits", "fits_with_warnings", "does_not_fit", "unknown")
    assert isinstance(data["findings"], list)
    for f in data["findings"]:
        assert {"severity", "code", "message", "remedy"} <= set(f), f
        assert all(isinstance(f[k], str) and f[k] for k in ("severity", "code", "message")), f
        assert isinstance(f["remedy"], str), f
    assert [n["name"] for n in data["nodes"]] == names
    for node in data["nodes"]:
        assert set(NODE_KEYS) <= set(node), node


def test_check_fits_on_two_128gb_nodes(cli: Cli, facts_128: Path) -> None:
    res = cli.run("check", "glm-5.3-flash", "--facts", str(facts_128), "--json")
    assert res.returncode == 0, _out(res)
    data = _json(res)
    _check_shape(data, ["spark-a", "spark-b"])
    assert data["verdict"] == "fits", data["findings"]
    for node in data["nodes"]:
        for key, kind in NODE_KEYS.items():
            assert isinstance(node[key], kind), (key, node)
        # TP 2: each rank holds about half the weights, inside the budget, with KV left over.
        assert 0 < node["weights_bytes"] < node["budget_bytes"]
        assert node["kv_budget_bytes"] > node["kv_per_request_bytes"] > 0
        assert node["max_concurrency"] >= 1


def test_check_human_report(cli: Cli, facts_128: Path) -> None:
    res = cli.run("check", "glm-5.3-flash", "--facts", str(facts_128))
    assert res.returncode == 0, _out(res)
    assert "fits" in res.stdout and "spark-a" in res.stdout and "spark-b" in res.stdout


def test_check_does_not_fit_on_64gb_nodes(cli: Cli, facts_64: Path) -> None:
    res = cli.run("check", "glm-5.3-flash", "--facts", str(facts_64), "--json")
    assert res.returncode == 1, _out(res)
    data = _json(res)
    _check_shape(data, ["spark-a", "spark-b"])
    assert data["verdict"] == "does_not_fit"
    errors = [f for f in data["findings"] if f["severity"] == "error"]
    assert errors and all(f["remedy"] for f in errors), data["findings"]


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ("gpu_memory_utilization=1.5", "gpu_memory_utilization"),
        ("max_num_seqs=abc", "max_num_seqs"),
        ("nonexistent_key=1", "nonexistent_key"),
        ("no_equals_sign", "no_equals_sign"),
    ],
)
def test_check_rejects_a_bad_set(cli: Cli, facts_128: Path, setting: str, needle: str) -> None:
    res = cli.run("check", "glm-5.3-flash", "--facts", str(facts_128), "--set", setting)
    _usage_error(res, needle)
    assert res.stdout == "", "nothing is checked when an override is bad"


def test_check_missing_facts_file(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    res = cli.run("check", "glm-5.3-flash", "--facts", str(missing))
    _usage_error(res, "nope.json")


def test_check_facts_file_not_json(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "facts.json"
    bad.write_text('{"nodes": [\n  {"name": "a",\n')
    res = cli.run("check", "glm-5.3-flash", "--facts", str(bad))
    _usage_error(res, "facts.json")


def test_check_unknown_recipe(cli: Cli, facts_128: Path) -> None:
    res = cli.run("check", "no-such-recipe", "--facts", str(facts_128))
    _usage_error(res, "no-such-recipe")
    assert "glm-5.3-flash" in res.stderr, "the remedy names the recipes that exist"


def test_check_recipe_with_yaml_syntax_error(cli: Cli, facts_128: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "broken.yaml"
    recipe.write_text(
        'recipe_version: "2"\nmodel: nvidia/GLM-5.3-Flash-FP4-Local\n'
        "defaults:\n  port: 8000\n  max_num_seqs: [4\ncommand: vllm serve {model}\n"
    )
    res = cli.run("check", str(recipe), "--facts", str(facts_128))
    _usage_error(res)
    assert re.search(r"broken\.yaml:\d+:\d+", res.stderr), _out(res)


def test_check_without_nodes_is_a_usage_error(cli: Cli) -> None:
    res = cli.run("check", "glm-5.3-flash")
    _usage_error(res)


def _node(**extra: Any) -> dict[str, Any]:
    return {"name": "spark-a", "address": "10.0.0.10", **extra}


@pytest.mark.parametrize(
    "node",
    [
        _node(memory_total_bytes="lots"),
        _node(interfaces="enp1s0f1np1"),
        _node(models=[{"repo_id": "nvidia/GLM-5.3-Flash-FP4-Local", "config": "not-a-dict"}]),
    ],
    ids=["memory-not-a-number", "interfaces-not-a-list", "model-config-not-an-object"],
)
def test_check_facts_with_wrong_types(cli: Cli, tmp_path: Path, node: dict[str, Any]) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"nodes": [node, dict(node, name="spark-b")]}))
    res = cli.run("check", "glm-5.3-flash", "--facts", str(facts))
    _usage_error(res)


# --- plan ------------------------------------------------------------------------------------

RANK_KEYS = (
    "rank",
    "role",
    "node",
    "address",
    "container_name",
    "image",
    "argv",
    "env",
    "mounts",
    "docker",
)


def _plan_shape(data: dict[str, Any]) -> None:
    assert {"cluster_id", "recipe", "settings", "ranks", "endpoint"} <= set(data), sorted(data)
    for r in data["ranks"]:
        assert set(RANK_KEYS) <= set(r), sorted(r)
        assert isinstance(r["argv"], list) and r["argv"][0] == "vllm", r["argv"][:3]
        assert all(isinstance(a, str) for a in r["argv"])
        assert isinstance(r["env"], dict)


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_plan_json(cli: Cli, facts_128: Path) -> None:
    res = cli.run(
        "plan", "glm-5.3-flash", "--facts", str(facts_128), "--json", env={"HF_TOKEN": SECRET}
    )
    assert res.returncode == 0, _out(res)
    assert SECRET not in res.stdout + res.stderr
    data = _json(res)
    _plan_shape(data)
    assert data["recipe"] == "glm-5.3-flash"
    head, worker = data["ranks"]
    assert (head["rank"], head["node"], worker["rank"], worker["node"]) == (
        0,
        "spark-a",
        1,
        "spark-b",
    )
    for r in data["ranks"]:
        assert r["env"].get("HF_TOKEN") == "${HF_TOKEN}", r["env"].get("HF_TOKEN")
        assert _flag(r["argv"], "--node-rank") == str(r["rank"])
        assert _flag(r["argv"], "--master-addr") == "192.168.100.10"
    assert "--headless" in worker["argv"] and "--headless" not in head["argv"]
    # Each node's network env comes from its own facts.
    assert head["env"]["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert worker["env"]["NCCL_SOCKET_IFNAME"] == "enP2p1s0f1np1"
    assert worker["env"]["NCCL_IB_HCA"] == "roceP2p1s0f1"


def test_plan_shell(cli: Cli, facts_128: Path, tmp_path: Path) -> None:
    res = cli.run(
        "plan", "glm-5.3-flash", "--facts", str(facts_128), "--shell", env={"HF_TOKEN": SECRET}
    )
    assert res.returncode == 0, _out(res)
    assert SECRET not in res.stdout + res.stderr
    script = tmp_path / "plan.sh"
    script.write_text(res.stdout)
    syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    # One section per node, each naming its rank and node, each with its own docker run.
    for rank, node in ((0, "spark-a"), (1, "spark-b")):
        assert re.search(rf"^#.*rank {rank}\b.*\b{node}\b", res.stdout, re.M), res.stdout[:2000]
    assert res.stdout.count("docker run") >= 2
    assert "enP2p1s0f1np1" in res.stdout and "enp1s0f1np1" in res.stdout


def test_plan_of_what_does_not_fit_says_so_beside_the_script(cli: Cli, facts_128: Path) -> None:
    # check says "does not fit" and launch refuses: the plan is still printed (to read, or
    # run by hand) but not as if it would start.
    words = ["glm-5.3-flash", "--facts", str(facts_128), "--set", "gpu_memory_utilization=0.3"]
    check = cli.run("check", *words)
    assert check.returncode == 1 and "does not fit" in check.stdout, _out(check)
    res = cli.run("plan", *words, "--shell")
    assert res.returncode == 0 and res.stdout.startswith("#!/usr/bin/env bash"), _out(res)
    assert "the fit check says this does not fit" in res.stderr, _out(res)
    assert f"`spark-tui check {' '.join(words)}`" in res.stderr, _out(res)
    fits = cli.run("plan", "glm-5.3-flash", "--facts", str(facts_128), "--shell")
    assert fits.returncode == 0 and "does not fit" not in fits.stderr, _out(fits)


def test_plan_rejects_a_shell_injection_in_an_integer(cli: Cli, facts_128: Path) -> None:
    res = cli.run(
        "plan",
        "glm-5.3-flash",
        "--facts",
        str(facts_128),
        "--json",
        "--set",
        "max_num_batched_tokens=4096; rm -rf /",
    )
    _usage_error(res, "max_num_batched_tokens")
    assert res.stdout == ""


def test_plan_keeps_a_string_setting_one_literal_argument(cli: Cli, facts_128: Path) -> None:
    sets = ("--set", f"served_model_name={INJECTION}")
    res = cli.run("plan", "glm-5.3-flash", "--facts", str(facts_128), "--json", *sets)
    assert res.returncode == 0, _out(res)
    for r in _json(res)["ranks"]:
        assert INJECTION in r["argv"], r["argv"]
        assert not any("rm -rf" in a and a != INJECTION for a in r["argv"])

    res = cli.run("plan", "glm-5.3-flash", "--facts", str(facts_128), "--shell", *sets)
    assert res.returncode == 0, _out(res)
    lines = [line for line in res.stdout.splitlines() if "rm -rf" in line]
    assert lines, "the setting is in the shell export"
    for line in lines:
        # Read the line as bash would: the value must come out as one word, not a command.
        words = shlex.split(line.rstrip("\\"), comments=True)
        assert INJECTION in words, line


# --- on simulated Sparks ---------------------------------------------------------------------


def _status(cli: Cli, sim: SimProcess) -> list[Any]:
    res = cli.run("status", "--inventory", str(sim.inventory), "--json")
    assert res.returncode == 0, _out(res)
    return _clusters(_json(res))


def _launch(cli: Cli, sim: SimProcess) -> subprocess.CompletedProcess[str]:
    res = cli.run(
        "launch",
        "glm-5.3-flash",
        "--inventory",
        str(sim.inventory),
        "--wait",
        env={"HF_TOKEN": SECRET},
        timeout=120,
    )
    sim.snapshot()
    return res


@pytest.fixture
def running(cli: Cli, sim: SimProcess) -> SimProcess:
    """The simulated Sparks with a cluster of ours running: the one an earlier test
    launched, else one launched here (so each test runs alone too)."""
    if not _status(cli, sim):
        res = _launch(cli, sim)
        assert res.returncode == 0, _out(res) + f"\n--- sim\n{sim.output()[-2000:]}"
    return sim


@pytest.fixture(scope="module")
def probed(cli: Cli, sim: SimProcess) -> subprocess.CompletedProcess[str]:
    """`probe --json` of the simulated Sparks, run once."""
    return cli.run("probe", "--inventory", str(sim.inventory), "--json", timeout=60)


def test_probe_inventory_json(
    cli: Cli, probed: subprocess.CompletedProcess[str], tmp_path_factory: Any
) -> None:
    res = probed
    assert res.returncode == 0, _out(res)
    data = _json(res)
    nodes = data["nodes"]
    assert len(nodes) == 2
    for n in nodes:
        keys = ("name", "address", "arch", "gpu_name", "memory_total_bytes")
        assert set(keys) <= set(n), sorted(n)
        assert {"memory_available_bytes", "interfaces", "images", "models"} <= set(n)
        assert n["gpu_name"] and "GB10" in n["gpu_name"]
        assert n["memory_total_bytes"] > 100 * 2**30
        for i in n["interfaces"]:
            assert {"netdev", "rdma_device", "state", "ipv4", "speed_mbps"} <= set(i), i
    up = [
        [i["netdev"] for i in n["interfaces"] if i["state"] == "up" and i["rdma_device"]]
        for n in nodes
    ]
    assert up[0] and up[1] and up[0][0] != up[1][0], up
    # What probe printed is a facts file: check works offline from it.
    facts = tmp_path_factory.mktemp("probed") / "facts.json"
    facts.write_text(res.stdout)
    res = cli.run("check", "glm-5.3-flash", "--facts", str(facts), "--json")
    assert res.returncode == 0, _out(res)
    assert _json(res)["verdict"] == "fits"


def test_check_on_simulated_nodes(cli: Cli, sim: SimProcess) -> None:
    res = cli.run("check", "glm-5.3-flash", "--inventory", str(sim.inventory), "--json")
    assert res.returncode == 0, _out(res)
    data = _json(res)
    assert data["verdict"] == "fits", data["findings"]
    assert len(data["nodes"]) == 2


def test_plan_on_simulated_nodes(
    cli: Cli, sim: SimProcess, probed: subprocess.CompletedProcess[str]
) -> None:
    res = cli.run("plan", "glm-5.3-flash", "--inventory", str(sim.inventory), "--json")
    assert res.returncode == 0, _out(res)
    data = _json(res)
    _plan_shape(data)
    assert len(data["ranks"]) == 2
    assert probed.returncode == 0, _out(probed)
    for rank, node in zip(data["ranks"], _json(probed)["nodes"], strict=True):
        assert rank["node"] == node["name"]
        netdevs = [i["netdev"] for i in node["interfaces"] if i["state"] == "up"]
        assert rank["env"]["NCCL_SOCKET_IFNAME"] in netdevs, (rank["env"], netdevs)


def test_status_before_launch_lists_nothing(cli: Cli, sim: SimProcess) -> None:
    if _status(cli, sim):  # another test launched first (a selection or another order)
        stopped = cli.run("stop", "--inventory", str(sim.inventory), timeout=60)
        assert stopped.returncode == 0, _out(stopped)
    assert _status(cli, sim) == []


def test_launch_wait(cli: Cli, sim: SimProcess) -> None:
    if _status(cli, sim):  # another test launched first (a selection or another order)
        stopped = cli.run("stop", "--inventory", str(sim.inventory), timeout=60)
        assert stopped.returncode == 0, _out(stopped)
    started = time.monotonic()
    res = _launch(cli, sim)
    _no_traceback(res)
    assert res.returncode == 0, _out(res) + f"\n--- sim\n{sim.output()[-2000:]}"
    assert SECRET not in res.stdout + res.stderr
    assert time.monotonic() - started < 90
    # The ranks run as the simulated containers' engine processes (checked gone after stop).
    assert len(_engines(sim)) >= 2, sim.output()[-2000:]


def _clusters(data: Any) -> list[Any]:
    """The clusters in `status --json` (a list, or an object holding a list of them)."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("clusters", "items"):
            if isinstance(data.get(key), list):
                return list(data[key])
    raise AssertionError(f"unexpected status --json shape: {data!r}"[:2000])


def test_status_lists_the_cluster(cli: Cli, running: SimProcess) -> None:
    sim = running
    res = cli.run("status", "--inventory", str(sim.inventory), "--json")
    assert res.returncode == 0, _out(res)
    clusters = _clusters(_json(res))
    assert len(clusters) == 1, clusters
    # The containers hold the resolved token; status must not show it back.
    assert SECRET not in res.stdout + res.stderr
    text = json.dumps(clusters[0])
    assert "glm-5.3-flash" in text
    # The API, and a tunnel command that works with the inventory's port, user and key.
    inv = yaml.safe_load(sim.inventory.read_text())["nodes"][0]
    tunnel = clusters[0]["endpoint"]["tunnel"]
    assert tunnel.startswith("ssh -N -L ") and f"-p {inv['port']}" in tunnel, tunnel
    if inv.get("identity_file"):
        assert inv["identity_file"] in tunnel
    assert tunnel.endswith(f"{inv['user']}@{inv['host']}" if inv.get("user") else inv["host"])
    # Launched with --wait: its API answers /health, so it is ready, not just "running".
    assert clusters[0]["state"] == "ready", clusters[0]
    human = cli.run("status", "--inventory", str(sim.inventory))
    assert "tunnel  ssh -N -L" in human.stdout and "API     http://" in human.stdout
    assert "  glm-5.3-flash  ready  " in human.stdout.splitlines()[0], human.stdout
    assert "sim-spark-1" in text and "sim-spark-2" in text, text[:2000]


def test_logs_of_the_worker(cli: Cli, running: SimProcess) -> None:
    sim = running
    res = cli.run("logs", "--inventory", str(sim.inventory), "--rank", "1")
    assert res.returncode == 0, _out(res)
    # vLLM's headless worker: its own load line, no API server (that runs on the head).
    assert "Model loading took" in res.stdout, _out(res)
    assert re.search(r"headless", res.stdout, re.I), _out(res)
    assert "Uvicorn running on" not in res.stdout
    assert SECRET not in res.stdout + res.stderr


def test_logs_of_the_head(cli: Cli, running: SimProcess) -> None:
    sim = running
    res = cli.run("logs", "--inventory", str(sim.inventory), "--rank", "0")
    assert res.returncode == 0, _out(res)
    assert "Application startup complete" in res.stdout, _out(res)


def test_smoke_on_the_cluster(cli: Cli, running: SimProcess) -> None:
    sim = running
    res = cli.run("smoke", "--inventory", str(sim.inventory), "--json", timeout=120)
    _no_traceback(res)
    assert res.returncode == 0, _out(res)
    data = _json(res)
    assert data["ok"] is True
    checks = data["checks"]
    assert len(checks) >= 5 and all(c["ok"] for c in checks), checks
    names = " ".join(str(c.get("name", "")) for c in checks)
    for part in ("health", "models", "chat", "tool", "stream"):
        assert part in names, names


def test_smoke_with_nothing_listening(cli: Cli) -> None:
    res = cli.run("smoke", "--base-url", "http://127.0.0.1:1", timeout=60)
    _no_traceback(res)
    assert res.returncode == 1, _out(res)
    assert re.search(r"cause:\s*\S", res.stdout + res.stderr), _out(res)
    assert re.search(r"remedy:\s*\S", res.stdout + res.stderr), _out(res)


@pytest.mark.parametrize(
    "args",
    [
        ("probe", "--hosts", "127.0.0.1:abc"),
        ("smoke", "--base-url", "http://[::1"),
        ("smoke", "--base-url", "ftp://127.0.0.1:1"),
        ("bench", "--base-url", "http://127.0.0.1:1", "--prompt-tokens", "512-128"),
        ("bench", "--base-url", "http://127.0.0.1:1", "--goodput", "ttft>=2s"),
        ("bench", "--base-url", "http://127.0.0.1:1", "--workload-file", "/nonexistent.jsonl"),
    ],
    ids=[
        "hosts-port-not-a-number",
        "base-url-unparsable",
        "base-url-not-http",
        "bench-lengths-backwards",
        "bench-goodput-not-a-limit",
        "bench-workload-file-missing",
    ],
)
def test_malformed_targets_are_usage_errors(cli: Cli, args: tuple[str, ...]) -> None:
    res = cli.run(*args, timeout=60)
    _usage_error(res)


def test_bench_on_the_cluster(cli: Cli, running: SimProcess) -> None:
    sim = running
    res = cli.run(
        "bench",
        "--inventory",
        str(sim.inventory),
        "--concurrency",
        "1,2",
        "--prompt-tokens",
        "normal:40,8,24-56",
        "--output-tokens",
        "8",
        "--requests-per-level",
        "2",
        "--repeats",
        "2",
        "--goodput",
        "ttft<=60s",
        "--seed",
        "4",
        "--json",
        timeout=120,
    )
    _no_traceback(res)
    assert res.returncode == 0, _out(res)
    data = _json(res)
    levels = data["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2]
    assert data["config"]["workload"]["prompt_tokens"] == "normal:40,8,24-56"
    assert data["config"]["workload"]["goodput"] == ["ttft<=60s"]
    assert data["config"]["workload"]["seed"] == 4
    for lv in levels:
        assert lv["errors"] == 0 and lv["requests"] == 4, lv
        assert lv["figures"]["ttft_p50_s"] > 0
        assert lv["figures"]["total_output_tps"] > 0
        # Every request met a one-minute TTFT; each repeat's figures give an interval.
        assert lv["figures"]["goodput_rps"] == pytest.approx(lv["figures"]["requests_per_s"])
        low, high = lv["ci95"]["total_output_tps"]
        assert low <= high
        # The simulated engine counted each prompt as long as asked for (within the bounds).
        assert lv["prompt_length_misses"] == 0 and lv["output_length_misses"] == 0
        assert 24 <= lv["prompt_tokens_mean"] <= 56


def test_relaunch_with_one_changed_setting(cli: Cli, running: SimProcess) -> None:
    """The tuning loop, headless: the same recipe with one setting changed replaces the
    running cluster (--replace removes our own containers without asking)."""
    sim = running
    before = _clusters(_json(cli.run("status", "--inventory", str(sim.inventory), "--json")))
    res = cli.run(
        "launch",
        "glm-5.3-flash",
        "--inventory",
        str(sim.inventory),
        "--set",
        "max_num_seqs=8",
        "--replace",
        "--wait",
        timeout=120,
    )
    sim.snapshot()
    _no_traceback(res)
    assert res.returncode == 0, _out(res)
    res = cli.run("status", "--inventory", str(sim.inventory), "--json")
    after = _clusters(_json(res))
    assert len(after) == 1, after
    assert json.dumps(after) != json.dumps(before), "the settings hash changed"


def test_tune_one_setting_against_a_baseline_measured_like_it(
    cli: Cli, running: SimProcess
) -> None:
    """`tune`: no benchmark of the running settings with these benchmark settings yet, so
    a baseline is measured first; then one change on every rank, the same benchmark."""
    sim = running
    quick = ["--concurrency", "1,2", "--prompt-tokens", "32", "--output-tokens", "8"]
    # The settings it tunes from: max_num_seqs=8 (the relaunch above leaves them so).
    commands = [r["command"] for c in _status(cli, sim) for r in c["ranks"]]
    if not commands or not all(_carries(argv, "--max-num-seqs", "8") for argv in commands):
        res = cli.run(
            "launch", "glm-5.3-flash", "--inventory", str(sim.inventory),
            "--set", "max_num_seqs=8", "--replace", "--wait", timeout=120,
        )  # fmt: skip
        assert res.returncode == 0, _out(res)
    res = cli.run(
        "tune",
        "glm-5.3-flash",
        "--inventory",
        str(sim.inventory),
        "--set",
        "max_num_seqs=4",
        *quick,
        "--requests-per-level",
        "2",
        "--json",
        timeout=180,
    )
    sim.snapshot()
    _no_traceback(res)
    assert res.returncode == 0, _out(res)
    data = _json(res)
    assert data["changed"] == [{"name": "max_num_seqs", "before": 8, "after": 4}], data
    assert data["comparable"] is True and data["smoke_ok"] is True
    assert "measuring the baseline before the change" in res.stderr
    # What the cockpit shows too: every rank checked for the change, the smoke checks after.
    assert data["ranks_carrying"] == [0, 1], data
    assert data["smoke"] and all(c["ok"] for c in data["smoke"]), data["smoke"]
    assert "every rank carries max_num_seqs=4" in res.stderr
    assert "smoke: " in res.stderr
    runs = {r["id"]: r for r in _json(cli.run("history", "--json"))}
    base, after = runs[data["baseline_id"]], runs[data["run_id"]]
    assert base["results"]["bench"]["config"] == after["results"]["bench"]["config"]
    assert after["results"]["bench"]["config"]["workload"]["output_tokens"] == 8


def _carries(argv: list[str], flag: str, value: str) -> bool:
    return any(a == flag and b == value for a, b in zip(argv, argv[1:], strict=False))


def test_stop_removes_the_cluster(cli: Cli, running: SimProcess) -> None:
    sim = running
    res = cli.run("stop", "--inventory", str(sim.inventory), timeout=60)
    _no_traceback(res)
    assert res.returncode == 0, _out(res)
    res = cli.run("status", "--inventory", str(sim.inventory), "--json")
    assert res.returncode == 0, _out(res)
    assert _clusters(_json(res)) == []
    # Every simulated container's engine process is gone too.
    deadline = time.monotonic() + 10
    engines = _engines(sim)
    while engines and time.monotonic() < deadline:
        time.sleep(0.2)
        engines = _engines(sim)
    assert not engines, engines


def _engines(sim: SimProcess) -> list[str]:
    found = []
    for pid, _start in descendants(sim.proc.pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if " serve " in cmd:
            found.append(f"{pid}: {cmd}")
    return found


def test_history_lists_the_runs(cli: Cli, request: pytest.FixtureRequest) -> None:
    kinds = {r["kind"] for r in _json(cli.run("history", "--json"))}
    if not {"launch", "smoke", "bench"} <= kinds:
        # Run alone: make the runs the tests above would have made.
        sim = request.getfixturevalue("running")
        for made in (["smoke"], ["bench", "--concurrency", "1", "--requests-per-level", "1"]):
            done = cli.run(*made, "--inventory", str(sim.inventory), timeout=120)
            assert done.returncode == 0, _out(done)
    res = cli.run("history", "--json")
    assert res.returncode == 0, _out(res)
    runs = _json(res)
    assert isinstance(runs, list)
    kinds = {r["kind"] for r in runs}
    assert {"launch", "smoke", "bench"} <= kinds, kinds
    # The stop kept each rank's last lines beside the launch it ended, and says where.
    last = [r for r in runs if r["kind"] == "launch"][-1]
    assert sorted(k["rank"] for k in last["rank_logs"]) == [0, 1], last["rank_logs"]
    assert all(Path(k["path"]).read_text().strip() for k in last["rank_logs"])
    shown = cli.run("history", "show", last["id"])
    assert shown.returncode == 0 and last["rank_logs"][0]["path"] in shown.stdout, _out(shown)
    assert SECRET not in res.stdout
    data_dir = Path(cli.env["SPARK_TUI_DATA_DIR"])
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_probe_unreachable_host(cli: Cli) -> None:
    res = cli.run("probe", "--hosts", "127.0.0.1:1", "--json", timeout=60)
    _no_traceback(res)
    assert res.returncode == 3, _out(res)
    assert re.search(r"^\s*remedy: \S", res.stderr, re.M), _out(res)

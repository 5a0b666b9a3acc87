"""spark-tui against REAL vLLM (0.32, CPU build) on two lab nodes, through the commands a
user types: probe, check, launch --wait, smoke, bench; the flag check against the image's own
vLLM; and the faults as real vLLM behaves (see LAB-NOTES "Real vLLM on CPU").

One real-vLLM lab and one real launch serve the whole module (each launch costs 90 s or
more on two cores); the tests run in file order and the fault tests, which end the cluster,
come last. Select them with `-m vllm`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
import yaml
from labkit import cli as _cli
from labkit import docker_client, lab_guard, real_vllm_to_end

from spark_tui.core import logclass
from spark_tui.sim.lab import Lab, vllm_image
from spark_tui.sim.lab.dockerd import containers

lab_guard()

pytestmark = [pytest.mark.lab, pytest.mark.vllm, pytest.mark.usefixtures("shared_flag_cache")]

# Real vLLM's outputs of the refused launches, kept for the stand-in's comparison below.
REAL_REFUSALS: dict[str, tuple[int, str]] = {}
READY_TIMEOUT = 900  # seconds: two real vLLM ranks on a busy 2-core machine
MODEL_DIR = f"/root/.cache/huggingface/hub/models--{vllm_image.MODEL_REPO.replace('/', '--')}"


@pytest.fixture(scope="module")
def files(vllm_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The inventory and, next to it, the recipe `lab up --engine vllm` writes."""
    d = tmp_path_factory.mktemp("vllm-lab")
    inventory = d / "lab.yaml"
    vllm_lab.write_inventory(inventory)
    recipe = vllm_lab.write_recipe(d)
    assert recipe is not None
    return {"dir": d, "inventory": inventory, "recipe": recipe}


def _client(lab: Lab, index: int) -> docker.DockerClient:
    return docker_client(lab, index, timeout=600)


def _real_vllm_once(lab: Lab, index: int, args: list[str]) -> tuple[int, str]:
    """Run real `vllm serve MODEL ARGS` in the lab image on node `index`; (exit, output)."""
    env = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    return real_vllm_to_end(lab, ["vllm", "serve", vllm_image.MODEL_REPO, *args], env, index)


# --- what lab up made ----------------------------------------------------------------------


def test_every_node_has_the_image_and_a_real_hub_cache_entry(
    vllm_lab: Lab, files: dict[str, Path]
) -> None:
    for node in vllm_lab.nodes:
        client = _client(vllm_lab, node.index)
        try:
            image = client.images.get(vllm_image.VLLM_IMAGE)
        finally:
            client.close()
        assert image.attrs["Config"]["Labels"]["org.spark-tui.vllm-version"] == "0.32.0"
        entry = node.home / ".cache" / "huggingface" / "hub" / Path(MODEL_DIR).name
        revision = (entry / "refs" / "main").read_text().strip()
        snap = entry / "snapshots" / revision
        names = {p.name for p in snap.iterdir()}
        assert {"config.json", "model.safetensors.index.json", "tokenizer.json"} <= names
        assert all((snap / n).is_symlink() for n in names), "snapshot files link to blobs/"
        index = json.loads((snap / "model.safetensors.index.json").read_text())
        assert set(index["weight_map"].values()) <= names
    recipe = yaml.safe_load(files["recipe"].read_text())
    assert recipe["model"] == vllm_image.MODEL_REPO and recipe["container"] == vllm_image.VLLM_IMAGE
    assert recipe["defaults"]["tensor_parallel"] == 2
    for flag in ("--enforce-eager", "--dtype float32", "--tool-call-parser hermes"):
        assert flag in recipe["command"]
    assert recipe["env"]["VLLM_CPU_OMP_THREADS_BIND"] == "{rank}"


def test_probe_finds_the_model_and_check_fits_with_its_real_config(
    files: dict[str, Path],
) -> None:
    probe = _cli("probe", "--inventory", str(files["inventory"]), "--json")
    assert probe.returncode == 0, probe.stderr
    nodes = json.loads(probe.stdout)["nodes"]
    assert len(nodes) == 2
    for node in nodes:
        (model,) = [m for m in node["models"] if m["repo_id"] == vllm_image.MODEL_REPO]
        assert model["config"]["num_attention_heads"] == 4
        assert model["config"]["max_position_embeddings"] == 4096
        assert any(i["ref"] == vllm_image.VLLM_IMAGE for i in node["images"])
    (files["dir"] / "facts.json").write_text(probe.stdout)

    check = _cli("check", str(files["recipe"]), "--inventory", str(files["inventory"]), "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    report = json.loads(check.stdout)
    assert report["verdict"] == "fits", report["findings"]
    assert report["parallel"]["tensor_parallel"] == 2 and report["max_model_len"] == 2048
    # The flags were checked against the image's own vLLM (no "not checked" note).
    assert not [f for f in report["findings"] if f["code"] == "flags_not_checked"]


def _three_node_facts(files: dict[str, Path]) -> Path:
    facts = json.loads((files["dir"] / "facts.json").read_text())
    third = dict(facts["nodes"][1], name="spark-lab-3", address="10.77.0.99")
    facts["nodes"].append(third)
    path = files["dir"] / "facts3.json"
    path.write_text(json.dumps(facts))
    return path


def _bad_recipe(files: dict[str, Path], extra: str) -> Path:
    text = files["recipe"].read_text().rstrip("\n") + f" \\\n    {extra}\n"
    path = files["dir"] / "bad-flags.yaml"
    path.write_text(text)
    return path


def test_check_predicts_what_real_vllm_refuses_in_its_own_words(
    vllm_lab: Lab, files: dict[str, Path]
) -> None:
    common = ["--dtype", "float32", "--enforce-eager", "--max-model-len"]
    cases = {
        "tp3": (1, [*common, "2048", "--tensor-parallel-size", "3"]),
        "long": (2, [*common, "8192"]),
        "flag": (1, [*common, "2048", "--no-such-flag"]),
        "choice": (2, ["--dtype", "float33"]),
    }

    async def all_real() -> dict[str, tuple[int, str]]:
        jobs = {
            k: asyncio.to_thread(_real_vllm_once, vllm_lab, n, a) for k, (n, a) in cases.items()
        }
        done = await asyncio.gather(*jobs.values())
        return dict(zip(jobs, done, strict=True))

    real = asyncio.run(all_real())
    REAL_REFUSALS.update(real)

    def line_of(output: str, needle: str) -> str:
        found = [ln for ln in output.splitlines() if needle in ln]
        assert found, f"real vLLM did not print {needle!r}:\n{output[-2000:]}"
        return found[-1]

    def findings(*args: str) -> dict[str, str]:
        res = _cli("check", *args, "--json")
        assert res.returncode == 1, res.stdout + res.stderr
        return {f["code"]: f["message"] for f in json.loads(res.stdout)["findings"]}

    # TP 3 with 4 heads (three nodes' facts: the third is the second's twin).
    code, out = real["tp3"]
    real_line = line_of(out, "must be divisible by tensor parallel size")
    assert code == 1
    got = findings(
        str(files["recipe"]), "--facts", str(_three_node_facts(files)), "--set", "tensor_parallel=3"
    )
    assert got["tp_heads"] in real_line  # word for word

    # max_model_len above the model's 4096.
    code, out = real["long"]
    real_line = line_of(out, "User-specified max_model_len (8192)")
    assert code == 1
    got = findings(
        str(files["recipe"]), "--inventory", str(files["inventory"]), "--set", "max_model_len=8192"
    )
    said = got["max_model_len_exceeds_model"]
    head = said.split("=", 1)[0] + "=4096"  # vLLM prints the limit as 4096 or 4096.0
    assert head in real_line, (said, real_line)

    # A flag this vLLM does not have: real vLLM exits 2 naming it; check blocks naming it and
    # the image, before any launch.
    code, out = real["flag"]
    assert code == 2 and "unrecognized arguments: --no-such-flag" in out
    got = findings(
        str(_bad_recipe(files, "--no-such-flag")), "--inventory", str(files["inventory"])
    )
    assert "--no-such-flag" in got["unknown_flag"] and vllm_image.VLLM_IMAGE in got["unknown_flag"]
    assert "unrecognized arguments: --no-such-flag" in got["unknown_flag"]

    # A value outside the flag's choices.
    code, out = real["choice"]
    assert code == 2 and "invalid choice: 'float33'" in out
    got = findings(
        str(_bad_recipe(files, "--dtype float33")), "--inventory", str(files["inventory"])
    )
    assert "--dtype" in got["flag_value"] and "float33" in got["flag_value"]
    assert vllm_image.VLLM_IMAGE in got["flag_value"]
    for node in vllm_lab.nodes:
        assert containers(node.docker_socket) == []


def test_launch_refuses_a_misspelt_flag_before_any_container_is_created(
    vllm_lab: Lab, files: dict[str, Path]
) -> None:
    # The same check as `check`, in the launch itself: real vLLM's own flag table (its
    # `vllm serve --help=all` in the image on the head), --force or not. The table is known
    # before the launch here (as after any `check`, or any launch, of the image): made now
    # when this test runs alone, a no-op after the module's earlier checks. (A first launch
    # of an image checks its flags beside the ranks instead, so it cannot refuse before.)
    known = _cli("check", str(files["recipe"]), "--inventory", str(files["inventory"]))
    assert known.returncode == 0, (known.stdout + known.stderr)[-3000:]
    res = _cli(
        "launch",
        str(_bad_recipe(files, "--enforce-eagr")),
        "--inventory",
        str(files["inventory"]),
        "--wait",
        "--force",
    )
    said = res.stdout + res.stderr
    assert res.returncode == 1, said[-3000:]
    assert "refused before any container was created" in said, said[-3000:]
    assert f"--enforce-eagr is not a flag of the vLLM in {vllm_image.VLLM_IMAGE}" in said
    assert "did you mean --enforce-eager?" in said
    assert "rank 0" not in said, "no rank was started"
    for node in vllm_lab.nodes:
        assert containers(node.docker_socket) == [], f"a container is left on {node.name}"


# --- one real launch for the rest ----------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(vllm_lab: Lab, files: dict[str, Path]) -> Iterator[dict[str, Any]]:
    """`spark-tui launch RECIPE --wait` of real vLLM across both nodes, stopped at the end."""
    started = time.monotonic()
    res = _cli(
        "launch",
        str(files["recipe"]),
        "--inventory",
        str(files["inventory"]),
        "--wait",
        "--replace",
        "--ready-timeout",
        str(READY_TIMEOUT),
        timeout=READY_TIMEOUT + 120,
    )
    info = {"launch": res, "seconds": time.monotonic() - started}
    try:
        yield info
    finally:
        _cli("stop", "--inventory", str(files["inventory"]), timeout=120)


def test_launch_wait_brings_both_real_ranks_to_ready_with_labelled_phases(
    cluster: dict[str, Any], files: dict[str, Path]
) -> None:
    res = cluster["launch"]
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    said = res.stdout + res.stderr  # progress goes to stderr, the result to stdout
    assert "rank 0 spark-lab-1: ready" in said and "rank 1 spark-lab-2: ready" in said
    seen: dict[int, dict[str, set[str]]] = {}
    for rank in (0, 1):
        logs = _cli(
            "logs", "--inventory", str(files["inventory"]), "--rank", str(rank), "--tail", "5000"
        )
        assert logs.returncode == 0, logs.stderr
        classifier = logclass.StreamClassifier()
        kinds: dict[str, set[str]] = {}
        for line in logs.stdout.splitlines():
            c = classifier.classify(line)
            kinds.setdefault(c.kind, set()).add(c.scope or "")
        seen[rank] = kinds
    head, worker = seen[0], seen[1]
    for phase in ("engine_init", "loading", "weights_loaded", "kv_cache", "api_starting"):
        assert phase in head.get("phase", set()), (phase, head)
    assert "api" in head.get("ready", set())
    assert "weights" in head.get("progress", set())
    # The CPU build's headless worker prints no line of its own when its startup ends (the
    # CUDA build's "Kernel JIT monitor activated"): its last is its KV cache; the launch
    # marks it ready with the API.
    for phase in ("distributed_init", "rank_assigned", "loading", "weights_loaded", "kv_cache"):
        assert phase in worker.get("phase", set()), (phase, worker)
    assert "error" not in head and "error" not in worker


async def _through_forward(lab: Lab) -> dict[str, Any]:
    from spark_tui.remote.ssh import ConnectionPool

    pool = ConnectionPool(lab.inventory_nodes()[:1], ssh_config=(), connect_timeout=10)
    await pool.open()
    try:
        port = await pool[lab.node(1).name].forward_local_port("127.0.0.1", 8000)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            models = (await http.get("/v1/models")).json()
            version = (await http.get("/version")).json()
            health = await http.get("/health")
            return {"models": models, "version": version, "health": health.status_code}
    finally:
        await pool.close()


def test_the_endpoint_answers_through_the_ssh_forward(
    cluster: dict[str, Any], vllm_lab: Lab
) -> None:
    assert cluster["launch"].returncode == 0
    got = asyncio.run(_through_forward(vllm_lab))
    assert got["health"] == 200
    assert got["version"] == {"version": "0.32.0"}
    assert [m["id"] for m in got["models"]["data"]] == ["tiny-qwen2"]
    assert got["models"]["data"][0]["max_model_len"] == 2048


def test_smoke_passes_and_diagnoses_a_model_that_answers_in_plain_text(
    cluster: dict[str, Any], files: dict[str, Path]
) -> None:
    assert cluster["launch"].returncode == 0
    res = _cli("smoke", "--inventory", str(files["inventory"]), "--json", timeout=600)
    out = json.loads(res.stdout)
    checks = {c["name"]: c for c in out["checks"]}
    for name in ("health", "models", "chat", "streaming"):
        assert checks[name]["ok"], checks[name]
    tool = checks["tool_call"]
    # A random model never calls a tool on its own; the server's parsing works, which the
    # forced call (tool_choice "required", one call) proves from real vLLM's response: the
    # tiny model never picks a whitespace-only token, so vLLM's grammar leaves it nothing to
    # write but the call itself (about 40 tokens; see tiny_model_maker.plant_reply).
    assert not tool["ok"]
    assert "plain-text answer" in tool["detail"]
    assert "does not call tools on its own" in tool["cause"], tool
    assert 'get_weather({"location": "Boston"})' in tool["cause"], tool
    forced = tool["data"]["forced_call"]
    assert forced["detail"].endswith("finish_reason tool_calls"), forced
    assert res.returncode == 1


COUNTED = ("vllm:generation_tokens_total", "vllm:request_success_total", "vllm:prompt_tokens_total")


def _metrics(base: str) -> dict[str, float]:
    text = httpx.get(base + "/metrics", timeout=30).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(COUNTED):
            name = line.split("{", 1)[0]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def test_bench_figures_agree_with_vllms_own_counters(
    cluster: dict[str, Any], files: dict[str, Path], vllm_lab: Lab
) -> None:
    assert cluster["launch"].returncode == 0
    base = f"http://{vllm_lab.node(1).address}:8000"
    before = _metrics(base)
    res = _cli(
        "bench",
        "--inventory",
        str(files["inventory"]),
        "--concurrency",
        "1,4",
        "--prompt-tokens",
        "40-96",
        "--output-tokens",
        "16-32",
        "--shared-prefix",
        "0.5",
        "--seed",
        "2",
        "--requests-per-level",
        "4",
        "--json",
        timeout=900,
    )
    after = _metrics(base)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    result = json.loads(res.stdout)
    tokens = sum(lv["output_tokens"] for lv in result["levels"])
    requests = sum(lv["requests"] - lv["errors"] for lv in result["levels"])
    prompts = sum(lv["prompt_tokens_mean"] * lv["requests"] for lv in result["levels"])
    served_tokens = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    served = after["vllm:request_success_total"] - before["vllm:request_success_total"]
    served_prompts = after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"]
    # The server also counted the bench's warm-up and calibration requests.
    requests += result["warmup_requests"]
    tokens += result["warmup_output_tokens"]
    prompts += result["warmup_prompt_tokens"]
    assert served == pytest.approx(requests, rel=0.05), (served, requests)
    assert tokens == pytest.approx(served_tokens, rel=0.05), (tokens, served_tokens)
    assert prompts == pytest.approx(served_prompts, rel=0.05), (prompts, served_prompts)
    # Real vLLM's /tokenize counts a chat prompt as its chat completion does: each prompt had
    # the length drawn for it (the tiny model's own tokenizer and template), and each reply
    # the output length asked for (max_tokens with ignore_eos, as vLLM's bench serve asks).
    assert result["forced_length"], result["notes"]
    assert not any("tokenize" in note for note in result["notes"]), result["notes"]
    for level in result["levels"]:
        assert level["errors"] == 0, level["error_samples"]
        assert level["prompt_length_misses"] == 0 and level["output_length_misses"] == 0
        assert level["prompt_tokens_mean"] == level["prompt_tokens_requested_mean"]
        assert 40 <= level["prompt_tokens_mean"] <= 96


def _counters(lab: Lab, index: int) -> tuple[int, int]:
    """The node's rank interface's (rx, tx) bytes, read inside its namespace."""
    node = lab.node(index)
    stats = f"/sys/class/net/{node.ifname}/statistics"
    out = subprocess.run(
        ["ip", "netns", "exec", node.netns, "cat", f"{stats}/rx_bytes", f"{stats}/tx_bytes"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    return int(out[0]), int(out[1])


def test_bench_sees_the_rank_interfaces_traffic_rise_on_both_nodes(
    cluster: dict[str, Any], files: dict[str, Path], vllm_lab: Lab
) -> None:
    """TP 2 over the veth: while the benchmark runs, the interface both ranks' Gloo/NCCL
    variables name carries their all-reduces, far above what it carries idle."""
    assert cluster["launch"].returncode == 0
    idle_s = 10.0
    before = _counters(vllm_lab, 2)
    time.sleep(idle_s)
    after = _counters(vllm_lab, 2)
    idle_rate = (after[0] - before[0] + after[1] - before[1]) / idle_s
    started = time.monotonic()
    res = _cli(
        "bench",
        "--inventory",
        str(files["inventory"]),
        "--concurrency",
        "4",
        "--prompt-tokens",
        "256",
        "--output-tokens",
        "32",
        "--requests-per-level",
        "8",
        "--json",
        timeout=900,
    )
    seconds = time.monotonic() - started
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    result = json.loads(res.stdout)
    link = {f["node"]: f for f in result["link"]}
    nodes = {n.name: n for n in vllm_lab.nodes}
    assert set(link) == set(nodes), result["link"]
    for name, fig in link.items():
        # The interface the ranks' environment names: the node's ConnectX-named veth end.
        assert fig["interface"] == nodes[name].ifname
        assert fig["samples"] >= 2 and fig["rx_bytes"] > 0 and fig["tx_bytes"] > 0
        assert fig["rx_peak_gbs"] > 0 and fig["tx_peak_gbs"] > 0
    worker = link[vllm_lab.node(2).name]
    busy_rate = (worker["rx_bytes"] + worker["tx_bytes"]) / seconds
    sys.stderr.write(f"link: idle {idle_rate:.0f} B/s, busy {busy_rate:.0f} B/s, {worker}\n")
    # The worker's interface carries no HTTP (the API is the head's): what rises is the
    # ranks' traffic, well above the idle keepalives and our own samples.
    assert busy_rate > 5 * idle_rate + 20_000, (busy_rate, idle_rate, worker)
    memory = {m["node"]: m for m in result["memory"]}
    assert set(memory) == set(nodes)
    assert all(0 < m["min_available"] < m["total"] for m in memory.values())


# --- the stand-in held against real vLLM ---------------------------------------------------


def _stand_in(*flags: str) -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))
    from engine_harness import Engine, free_port

    port = free_port()
    argv = ["serve", STAND_IN_MODEL, "--host", "127.0.0.1", "--port", str(port), *flags]
    return Engine(argv), port


STAND_IN_MODEL = "Qwen/Qwen3-0.6B"  # a model of the stand-in's catalogue (4 heads it has not)
SERVE_FLAGS = (
    "--served-model-name",
    "tiny-qwen2",
    "--max-model-len",
    "2048",
    "--dtype",
    "float32",
    "--enforce-eager",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
)


def test_the_stand_in_answers_like_real_vllm(
    cluster: dict[str, Any], vllm_lab: Lab, files: dict[str, Path]
) -> None:
    import standin_compare as sc

    assert cluster["launch"].returncode == 0
    real_base = f"http://{vllm_lab.node(1).address}:8000"
    engine, port = _stand_in(*SERVE_FLAGS)
    try:
        engine.wait_healthy(port, timeout=60)
        sim_base = f"http://127.0.0.1:{port}"
        real = sc.send(real_base, "tiny-qwen2")
        sim = sc.send(sim_base, "tiny-qwen2")
        real_metrics = sc.metric_names(httpx.get(real_base + "/metrics", timeout=30).text)
        sim_metrics = sc.metric_names(httpx.get(sim_base + "/metrics", timeout=30).text)
        sim_log = engine.output.splitlines()
    finally:
        engine.stop()
    problems: list[str] = sc.version_problems(real, sim)
    for name, r in real.items():
        m = sim[name]
        if (r.status, r.content_type) != (m.status, m.content_type):
            problems.append(
                f"{name}: real {r.status} {r.content_type}, stand-in {m.status} {m.content_type}"
            )
        if r.events or m.events:
            if sc.stream_summary(r.events) != sc.stream_summary(m.events):
                problems.append(
                    f"{name}: chunks {sc.stream_summary(r.events)} vs {sc.stream_summary(m.events)}"
                )
            if r.framing[-3:] != m.framing[-3:] or set(r.framing) != set(m.framing):
                problems.append(f"{name}: SSE framing {r.framing[-4:]} vs {m.framing[-4:]}")
            for i in (0, 1, -2, -1):
                for d in sc.diff_shapes(sc.shape(r.events[i]), sc.shape(m.events[i])):
                    problems.append(f"{name} chunk {i}: {d}")
        else:
            diffs = sc.diff_shapes(sc.shape(r.body), sc.shape(m.body))
            problems += [f"{name}: {d}" for d in diffs]
            if name == "tool_required":
                for who, reply in (("real vLLM", r), ("stand-in", m)):
                    choice = ((reply.body or {}).get("choices") or [{}])[0]
                    calls = (choice.get("message") or {}).get("tool_calls") or []
                    if choice.get("finish_reason") != "tool_calls" or len(calls) != 1:
                        problems.append(f"{name}: {who} gave {choice}")
        if name.startswith("err") and isinstance(r.body, dict) and "error" in r.body:
            rt, mt = r.body["error"], (m.body or {}).get("error", {})
            if (rt.get("type"), rt.get("code")) != (mt.get("type"), mt.get("code")):
                problems.append(f"{name}: error type/code {rt} vs {mt}")
    # Every metric the stand-in serves is a real one, with labels real vLLM has; the ones
    # spark-tui reads are served by both.
    for metric, labels in sim_metrics.items():
        if metric not in real_metrics:
            problems.append(f"metric {metric} is not real vLLM's")
        elif labels - real_metrics[metric]:
            problems.append(f"metric {metric}: labels {sorted(labels - real_metrics[metric])}")
    for used in (
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
    ):
        if used not in real_metrics or used not in sim_metrics:
            problems.append(
                f"metric {used}: real {used in real_metrics}, stand-in {used in sim_metrics}"
            )
    # Every classifier label real vLLM's startup shows, the stand-in's shows too.
    real_head = _cli(
        "logs", "--inventory", str(files["inventory"]), "--rank", "0", "--tail", "5000"
    )
    real_labels = _labels(real_head.stdout.splitlines())
    sim_labels = _labels(sim_log)
    missing = real_labels - sim_labels - {("phase", "distributed_init"), ("phase", "rank_assigned")}
    if missing:
        problems.append(f"log labels the stand-in never shows: {sorted(missing)}")
    assert not problems, "\n".join(problems)


def _labels(lines: list[str]) -> set[tuple[str, str]]:
    c = logclass.StreamClassifier()
    out = set()
    for line in lines:
        r = c.classify(line)
        if r.kind in ("phase", "ready", "progress"):
            out.add((r.kind, r.scope or ""))
    return out


def test_the_stand_in_refuses_what_real_vllm_refuses_in_the_same_words() -> None:
    import re

    assert REAL_REFUSALS, "runs after test_check_predicts_what_real_vllm_refuses_in_its_own_words"
    common = ["--dtype", "float32", "--enforce-eager"]
    cases = {
        "tp3": (
            [*common, "--tensor-parallel-size", "3"],
            "must be divisible by tensor parallel size",
        ),
        "long": ([*common, "--max-model-len", "100000"], "User-specified max_model_len"),
        "flag": ([*common, "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        "choice": (["--dtype", "float33"], "invalid choice: 'float33'"),
    }

    def words(line: str, start: str) -> str:
        text = line[line.index(start) :].split(" [type=", 1)[0]
        text = text.split("(max_position_embeddings", 1)[0]
        return re.sub(r"\d+(\.\d+)?", "N", text).strip()

    problems = []
    for name, (flags, needle) in cases.items():
        engine, _port = _stand_in(*flags)
        try:
            code = engine.wait_exit(60)
        finally:
            engine.stop()
        real_code, real_out = REAL_REFUSALS[name]
        real_line = next(ln for ln in real_out.splitlines() if needle in ln)
        sim_lines = [ln for ln in engine.output.splitlines() if needle in ln]
        if code != real_code:
            problems.append(f"{name}: exit {code}, real vLLM {real_code}")
        if not sim_lines:
            problems.append(f"{name}: the stand-in never says {needle!r}:\n{engine.output[-800:]}")
            continue
        start = needle.split(" ", 1)[0] if name != "tp3" else "Total number"
        if words(sim_lines[-1], start) != words(real_line, start):
            problems.append(f"{name}: {sim_lines[-1]!r} vs real {real_line!r}")
        real_cause = logclass.classify(real_line).detail
        if logclass.classify(sim_lines[-1]).detail != real_cause:
            problems.append(
                f"{name}: classified {logclass.classify(sim_lines[-1])} vs {real_cause}"
            )
    assert not problems, "\n".join(problems)


# --- faults, as real vLLM behaves (these end the cluster: keep them last) --------------------


def _wait_for(cond: Any, timeout: float, what: str) -> float:
    """Poll `cond()` until it holds; the seconds it took (fail naming `what` after `timeout`)."""
    started = time.monotonic()
    while not cond():
        if time.monotonic() - started > timeout:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - started


def test_a_worker_killed_after_ready_is_reported_by_watch_then_status_then_cleaned_up(
    cluster: dict[str, Any], vllm_lab: Lab, files: dict[str, Path]
) -> None:
    """The user's path after `launch --wait`: `spark-tui watch` runs; the worker's container
    is killed. Real vLLM's head stays healthy until a request needs the engine: watch's
    1-token request makes it fail, and watch reports rank 1 on its node with its lines and the
    head's, keeps the ranks (--keep-failed) with the clean-up command, and exits 1. `status` then says failed (not stopped), which
    rank and why, and offers the clean-up; running it leaves no container on either node."""
    import shlex

    from labkit import Lines, spark_tui

    assert cluster["launch"].returncode == 0
    inv = str(files["inventory"])
    worker_node = vllm_lab.node(2).name
    # --keep-failed: the ranks stay for `status` to diagnose (without it the watch stops them).
    watch = spark_tui("watch", "--inventory", inv, "--keep-failed", raw=True)
    out, err = Lines(watch.stdout), Lines(watch.stderr)
    try:
        _wait_for(lambda: out.has("probe ok"), 120, "watch's first answered request")
        client = _client(vllm_lab, 2)
        try:
            (worker,) = client.containers.list()
            worker.kill()
        finally:
            client.close()
        after = _wait_for(lambda: err.has("FAILED: rank"), 60, "watch to report the failure")
        code = watch.wait(60)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    said = err.join()
    print(f"\nwatch reported the killed worker {after:.1f} s after the kill:\n{said}")
    assert after < 30, f"reported {after:.1f} s after the kill"
    assert code == 1, f"exit {code} (1: the cluster failed)\n{said}"
    assert "Traceback" not in said, said
    alert = said.split("\n")
    (lead,) = [i for i, ln in enumerate(alert) if ln.startswith("FAILED: rank")]
    assert alert[lead].startswith(f"FAILED: rank 1 on {worker_node} "), said
    assert "killed" in alert[lead], alert[lead]
    assert alert[lead + 1].startswith("  | "), "the lines that explain rank 1's failure\n" + said
    assert "  the head says:" in alert, "the head's explaining lines with rank 1\n" + said
    head_said = alert[alert.index("  the head says:") + 1 :]
    assert head_said and head_said[0].startswith("  | "), said
    # The clean-up names the cluster (with clusters side by side a bare stop asks which).
    cleanup = f"clean up: spark-tui stop --inventory {inv} --cluster "
    (by_watch,) = [ln for ln in alert if ln.startswith(cleanup)]

    status = _cli("status", "--inventory", inv, timeout=120)
    assert status.returncode == 1, status.stdout + status.stderr
    shown = status.stdout.splitlines()
    (head_line,) = [ln for ln in shown if ln.startswith("cluster ")]
    assert " failed " in head_line and "stopped" not in head_line, head_line
    failed = [i for i, ln in enumerate(shown) if ln.startswith("  failed: ")]
    assert failed and shown[failed[0]].startswith(f"  failed: rank 1 on {worker_node} "), shown
    assert shown[failed[0] + 1].startswith("    | "), "why: rank 1's lines\n" + status.stdout
    offered = [ln.split("clean up: ", 1)[1] for ln in shown if "clean up: " in ln]
    # status and watch give the same command, naming the failed cluster.
    assert offered == [by_watch.split("clean up: ", 1)[1]], status.stdout
    assert offered[0].endswith(f" --cluster {head_line.split()[1]}"), (offered, head_line)

    argv = shlex.split(offered[0])
    stopped = _cli(*argv[1:], timeout=180)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    for node in vllm_lab.nodes:
        assert containers(node.docker_socket) == [], f"a container is left on {node.name}"


# (A head whose worker never comes: the rendezvous drill of test_lab_vllm_drills.py.)

"""A user's registry recipe, end to end on the REAL-vLLM lab, through the commands a user types.

A sparkrun-style registry (a local git repository this test makes: `recipes/` and `mods/`)
is named in spark-tui's config and cloned by `spark-tui recipes`. Its recipe serves a model
that no lab node has, with a mod whose run.sh writes the chat template the recipe passes
to `--chat-template` (as registry recipes do). The model's files (the lab's tiny Qwen2
under another repo id) are served by the SIMULATED Hub, reached through HF_ENDPOINT; the
nodes have no Hub CLI and cannot reach it, so the download happens once, on this machine.

`check` gives a real verdict from the Hub's facts and names the Hub as their source;
`models sync` puts the model on both nodes (one download, then head to worker over the
link); `launch --wait` runs the mod on both ranks before `vllm serve` and reaches ready,
with real vLLM rendering prompts through the mod's template; `smoke` answers health and
chat; `stop` leaves no container. Real vLLM is needed here: only it fails at startup when
the template file is missing, and only its renderer proves the file was read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from labkit import cli as _cli
from labkit import lab_guard

from spark_tui.core import logclass
from spark_tui.sim.hub import SimulatedHub, SimulatedRepo
from spark_tui.sim.lab import Lab, vllm_image
from spark_tui.sim.lab.dockerd import containers
from spark_tui.sim.lab.sshd import generate_key

lab_guard()

pytestmark = [pytest.mark.lab, pytest.mark.vllm]

READY_TIMEOUT = 900  # seconds: two real vLLM ranks on a busy 2-core machine
REPO = "e2e-registry/tiny-qwen2-chat"  # the lab's tiny model under a name no node caches
FOLDER = "models--" + REPO.replace("/", "--")
REGISTRY = "e2e"
RECIPE = "tiny-chat-mod"
MOD = "chat-tmpl"
TEMPLATE = f"/workspace/mods/{MOD}/chat.jinja"
MARK = "rendered by the chat-tmpl mod"
# ChatML with a system line of the mod's own, on one line (Jinja turns the escaped newlines
# in its strings into newlines): the prompt real vLLM renders shows it; the model's own
# template has no such line.
JINJA = (
    "{{- '<|im_start|>system\\n" + MARK + "<|im_end|>\\n' }}"
    "{%- for m in messages %}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
RUN_SH = (
    "#!/bin/sh\n"
    "set -e\n"
    f'echo "{MOD}: writing $PWD/chat.jinja (workspace $WORKSPACE_DIR)"\n'
    "cat > chat.jinja <<'EOF'\n" + JINJA + "\nEOF\n"
    f'echo "{MOD}: done ($(wc -c < chat.jinja) bytes)"\n'
)


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=e2e", "-c", "user.email=e2e@lab.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _recipe_text() -> str:
    """The lab's real-vLLM recipe for two nodes, as a registry recipe with the mod."""
    data = yaml.safe_load(vllm_image.recipe_text(2))
    data["model"] = REPO
    data["metadata"] = {"description": "tiny Qwen2 with a chat template written by a mod"}
    data["mods"] = [f"mods/{MOD}"]
    data["command"] = data["command"].rstrip("\n") + f" \\\n  --chat-template {TEMPLATE}\n"
    return yaml.safe_dump(data, sort_keys=False)


def make_registry(root: Path) -> Path:
    """A sparkrun-style registry as a git repository: recipes by family, mods beside them."""
    recipe = root / "recipes" / "tiny" / f"{RECIPE}.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(_recipe_text())
    mod = root / "mods" / MOD
    mod.mkdir(parents=True)
    (mod / "run.sh").write_text(RUN_SH)
    (root / "README.md").write_text("A recipe registry of the end-to-end test.\n")
    _git(root, "init", "--quiet", "--initial-branch", "main")
    _git(root, "add", ".")
    _git(root, "commit", "--quiet", "-m", "tiny recipe with a chat-template mod")
    return root


def tiny_model_files(lab: Lab) -> tuple[str, dict[str, bytes]]:
    """The lab's tiny model as it is in the built hub cache: (revision, files)."""
    entry = vllm_image.build_dir(lab.cfg.cache_dir) / f"hub-{vllm_image.MODEL_VERSION}"
    entry /= "models--" + vllm_image.MODEL_REPO.replace("/", "--")
    revision = (entry / "refs" / "main").read_text().strip()
    snap = entry / "snapshots" / revision
    return revision, {p.name: p.read_bytes() for p in sorted(snap.iterdir())}


def hub_entry(lab: Lab, index: int) -> Path:
    return lab.node(index).home / ".cache" / "huggingface" / "hub" / FOLDER


@pytest.fixture
def node_keys(vllm_lab: Lab) -> Iterator[None]:
    """The head can SSH to the worker, as a Spark cluster is set up (its own key authorized
    on the worker, the worker's host key known): copies then go node to node."""
    ssh_dir = vllm_lab.node(1).home / ".ssh"
    had_dir = ssh_dir.exists()
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    generate_key(ssh_dir / "id_ed25519", "e2e-head")
    auth = vllm_lab.cfg.authorized_keys
    before = auth.read_text()
    auth.write_text(before + (ssh_dir / "id_ed25519.pub").read_text())
    (ssh_dir / "known_hosts").write_text(vllm_lab.cfg.known_hosts.read_text())
    try:
        yield
    finally:
        auth.write_text(before)
        if had_dir:
            for name in ("id_ed25519", "id_ed25519.pub", "known_hosts"):
                (ssh_dir / name).unlink(missing_ok=True)
        else:
            shutil.rmtree(ssh_dir, ignore_errors=True)


@pytest.fixture
def hub(vllm_lab: Lab, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SimulatedHub, str]]:
    """The SIMULATED Hub serving the tiny model's real files as REPO; HF_ENDPOINT set."""
    revision, files = tiny_model_files(vllm_lab)
    repo = SimulatedRepo(REPO, {revision: dict(files)}, {"main": revision})
    with SimulatedHub([repo]) as running:
        monkeypatch.setenv("HF_ENDPOINT", running.endpoint)
        yield running, revision


@pytest.fixture
def no_model_left(vllm_lab: Lab) -> Iterator[None]:
    """The nodes start without REPO and end without it (other tests share the lab)."""
    for i in (1, 2):
        assert not hub_entry(vllm_lab, i).exists(), f"a node already caches {REPO}"
    yield
    for i in (1, 2):
        shutil.rmtree(hub_entry(vllm_lab, i), ignore_errors=True)


def _check(inventory: Path) -> dict[str, object]:
    res = _cli("check", RECIPE, "--inventory", str(inventory), "--json", timeout=600)
    assert res.returncode in (0, 1), res.stdout + res.stderr
    doc: dict[str, object] = json.loads(res.stdout)
    doc["_exit"] = res.returncode
    return doc


def _rank_log(inventory: Path, rank: int, node: str) -> list[str]:
    """The rank's container log, as `spark-tui logs` prints it, without the rank prefix."""
    res = _cli("logs", "--inventory", str(inventory), "--rank", str(rank), "--tail", "5000")
    assert res.returncode == 0, res.stderr
    prefix = f"[{rank} {node}] "
    lines = res.stdout.splitlines()
    # (A message vLLM logs across lines keeps the prefix on its first line only.)
    assert lines and lines[0].startswith(prefix), res.stdout[:500]
    return [ln.removeprefix(prefix) for ln in lines]


def _rendered_prompt(base: str) -> str:
    """The prompt real vLLM renders for one user message (its own chat template code)."""
    messages = [{"role": "user", "content": "hello"}]
    with httpx.Client(base_url=base, timeout=60) as http:
        tok = http.post("/tokenize", json={"model": "tiny-qwen2", "messages": messages})
        tok.raise_for_status()
        text = http.post(
            "/detokenize", json={"model": "tiny-qwen2", "tokens": tok.json()["tokens"]}
        )
        text.raise_for_status()
    return str(text.json()["prompt"])


def test_a_registry_recipe_with_a_mod_and_a_model_no_node_has_runs_on_real_vllm(
    vllm_lab: Lab,
    tmp_path: Path,
    hub: tuple[SimulatedHub, str],
    node_keys: None,
    no_model_left: None,
) -> None:
    simulated_hub, revision = hub
    started = time.monotonic()
    steps: dict[str, float] = {}

    def lap(name: str, since: float) -> float:
        now = time.monotonic()
        steps[name] = now - since
        return now

    inventory = tmp_path / "lab.yaml"
    vllm_lab.write_inventory(inventory)

    # --- the registry, as a user adds one: named in the config, cloned by `recipes` ------
    origin = make_registry(tmp_path / "registry")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "spark-tui" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        yaml.safe_dump({"registries": [{"name": REGISTRY, "url": f"file://{origin}"}]})
    )
    listed = _cli("recipes", "--json")
    assert listed.returncode == 0, listed.stderr
    assert f"registry {REGISTRY} cloned" in listed.stderr
    (row,) = [r for r in json.loads(listed.stdout) if r["name"] == RECIPE]
    assert row["origin"] == f"registry:{REGISTRY}" and row["model"] == REPO
    assert row["mods"] == [f"mods/{MOD}"] and row["mods_missing"] == []
    assert row["refused"] is None
    t = lap("registry", started)

    # --- check: a real verdict from the Hub's facts, before any download ----------------
    before = _check(inventory)
    t = lap("check before sync", t)
    sources = before["facts_sources"]
    assert isinstance(sources, dict)
    hub_label = f"Hugging Face Hub {REPO}@{revision[:12]}"
    for fact in ("num_hidden_layers", "num_attention_heads", "weight_bytes"):
        assert str(sources[fact]).startswith(hub_label), (fact, sources)
    # Not "unknown": the Hub's facts are complete. The memory fits; what blocks is only the
    # model, on neither node yet (and the recipe keeps the nodes offline: vLLM would stop).
    assert before["verdict"] == "does_not_fit" and before["_exit"] == 1, before["findings"]
    findings = before["findings"]
    assert isinstance(findings, list)
    errors = [f for f in findings if f["severity"] == "error"]
    assert sorted(f["code"] for f in errors) == ["model_missing_on_node"] * 2, findings
    for f in errors:
        assert f"spark-tui models sync {RECIPE} --inventory {inventory}" in f["remedy"]
    assert not [f for f in findings if f["code"].startswith(("hub_", "mod_"))], findings
    nodes = before["nodes"]
    assert isinstance(nodes, list) and len(nodes) == 2
    shard_bytes = sum(len(b) for n, b in tiny_model_files(vllm_lab)[1].items() if ".safet" in n)
    for node in nodes:
        assert node["weights_bytes"] == pytest.approx(shard_bytes / 2, rel=0.1), node
        assert node["kv_tokens"] and node["kv_tokens"] > 0, node
    # What the user reads: the verdict and, per fact, the Hub it came from.
    text = _cli("check", RECIPE, "--inventory", str(inventory), timeout=600)
    t = lap("check (text)", t)
    assert "verdict   does not fit" in text.stdout, text.stdout
    shown = text.stdout.split("model facts from\n", 1)[1]
    assert shown.startswith(f"  {hub_label}"), text.stdout
    asked = [r.path for r in simulated_hub.requests if r.status in (200, 206)]
    assert f"/api/models/{REPO}" in asked or f"/api/models/{REPO}/revision/main" in asked

    # --- models sync: one download here, then node to node -------------------------------
    sync = _cli("models", "sync", RECIPE, "--inventory", str(inventory), timeout=600)
    t = lap("models sync", t)
    assert sync.returncode == 0, sync.stdout + sync.stderr
    said = sync.stdout
    head, worker = vllm_lab.node(1), vllm_lab.node(2)
    assert "has no Hub CLI (hf): downloading" in said
    assert f"(this machine) -> {head.name} through this machine" in said
    assert f"{head.name} -> {worker.name} over ConnectX link (root@{worker.address})" in said
    assert "warning" not in said, said
    assert f"complete on every node: {REPO}" in said
    downloads = [
        r
        for r in simulated_hub.requests
        if r.method == "GET"
        and "/resolve/" in r.path
        and r.path.endswith(".safetensors")
        and r.range is None
    ]
    shards = sorted(n for n in tiny_model_files(vllm_lab)[1] if n.endswith(".safetensors"))
    assert sorted(r.path.rsplit("/", 1)[1] for r in downloads) == shards, "each shard once"
    _, files = tiny_model_files(vllm_lab)
    for i in (1, 2):
        entry = hub_entry(vllm_lab, i)
        assert (entry / "refs" / "main").read_text() == revision
        snap = entry / "snapshots" / revision
        assert {p.name: p.read_bytes() for p in snap.iterdir()} == files
        assert all((snap / n).is_symlink() for n in files), "the Hub's layout: links to blobs"

    after = _check(inventory)
    t = lap("check after sync", t)
    assert after["verdict"] == "fits" and after["_exit"] == 0, after["findings"]

    # --- launch --wait: the mod on both ranks before vllm serve, then ready --------------
    try:
        launch = _cli(
            "launch",
            RECIPE,
            "--inventory",
            str(inventory),
            "--wait",
            "--replace",
            "--ready-timeout",
            str(READY_TIMEOUT),
            timeout=READY_TIMEOUT + 120,
        )
        t = lap("launch --wait", t)
        assert launch.returncode == 0, launch.stdout[-3000:] + launch.stderr[-3000:]
        said = launch.stdout + launch.stderr
        assert f"rank 0 {head.name}: ready" in said and f"rank 1 {worker.name}: ready" in said
        for rank, node in ((0, head), (1, worker)):
            lines = _rank_log(inventory, rank, node.name)
            start = lines.index(f"spark-tui prelaunch: mod {MOD}: start")
            wrote = next(
                i for i, ln in enumerate(lines) if ln.startswith(f"{MOD}: writing {TEMPLATE} (")
            )
            done = lines.index("spark-tui prelaunch: done; starting the serve command")
            assert start < wrote < done, lines[: done + 1]
            assert any(ln.startswith(f"{MOD}: done (") for ln in lines[wrote:done])
            # Every phase line of vLLM's startup comes after the mod's (serve is exec'd then);
            # the wrapper's own markers are phases too, of the prelaunch.
            classifier = logclass.StreamClassifier()
            kinds = [classifier.classify(ln) for ln in lines]
            phases = [
                i for i, c in enumerate(kinds) if c.kind == "phase" and c.scope != "prelaunch"
            ]
            assert phases and phases[0] > done, (rank, lines[: done + 3])
            assert {c.scope for c in kinds[: done + 1] if c.kind == "phase"} == {"prelaunch"}
        base = f"http://{head.address}:8000"
        prompt = _rendered_prompt(base)
        assert MARK in prompt and prompt.index(MARK) < prompt.index("hello"), prompt

        smoke = _cli("smoke", "--inventory", str(inventory), "--json", timeout=600)
        t = lap("smoke", t)
        checks = {c["name"]: c for c in json.loads(smoke.stdout)["checks"]}
        for name in ("health", "models", "chat", "streaming"):
            assert checks[name]["ok"], checks[name]
    finally:
        stop = _cli("stop", "--inventory", str(inventory), timeout=300)
        lap("stop", t)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    for node in vllm_lab.nodes:
        assert containers(node.docker_socket) == [], f"a container is left on {node.name}"
    total = time.monotonic() - started
    print(
        f"\nregistry e2e on real vLLM: {total:.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in steps.items())
        + ")"
    )

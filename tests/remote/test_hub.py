"""Model facts from the Hub, against the SIMULATED Hub (spark_tui/sim/hub) on 127.0.0.1.

huggingface_hub speaks to it as to huggingface.co: HF_ENDPOINT is the only thing changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_tui.core.facts import CachedModel, NodeFacts, parse_facts
from spark_tui.core.fit import Finding, check_fit
from spark_tui.core.model_facts import (
    HubFacts,
    facts_from_nodes,
    missing_for_fit,
    resolve_model_facts,
)
from spark_tui.core.overrides import apply_overrides
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.render import render_argv, render_env
from spark_tui.remote.hub import cache_root, fetch_model_facts, fetch_repo_facts
from spark_tui.sim.engine import catalogue
from spark_tui.sim.hub import SimulatedHub, SimulatedRepo, catalogue_repo
from spark_tui.sim.hub.repos import model_repo

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
QWEN = "Qwen/Qwen3-8B"
LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
GLM = "nvidia/GLM-5.3-Flash-FP4-Local"
TOKEN = "hf_simulatedTOKENvalue0123456789"


@pytest.fixture
def hub() -> Iterator[SimulatedHub]:
    repos = [
        catalogue_repo(QWEN),
        catalogue_repo(LLAMA, gated=True, granted=frozenset({TOKEN})),
    ]
    with SimulatedHub(repos) as running:
        yield running


def env_for(hub: SimulatedHub, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_OFFLINE")}
    env["HF_ENDPOINT"] = hub.endpoint
    env.update(extra)
    return env


def test_facts_come_from_config_index_and_shard_headers(hub: SimulatedHub) -> None:
    got = fetch_repo_facts(QWEN, None, env_for(hub))
    assert isinstance(got, HubFacts), got
    assert got.revision == hub.repos[QWEN].refs["main"]
    assert got.config == catalogue.hf_config(QWEN)
    # vLLM's "Checkpoint size": the safetensors files' sizes.
    assert got.weight_bytes == sum(size for _, size in catalogue.shard_files(QWEN))
    assert got.dtype == "bfloat16" and sum(got.parameters.values()) > 0
    seen = [(r.method, r.path.rsplit("/", 1)[-1], r.range) for r in hub.requests]
    assert ("HEAD", "config.json", None) in seen  # huggingface_hub's metadata request
    shard_reads = [s for s in seen if s[1].startswith("model-") and s[2]]
    assert len(shard_reads) == len(catalogue.shard_files(QWEN))  # headers only, by range
    assert not [s for s in seen if s[1].startswith("model-") and not s[2]]  # no full shard


def test_the_recipe_revision_is_the_commit_read(hub: SimulatedHub) -> None:
    old = model_repo(
        "org/pinned",
        {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64},
        {},
        sha="a" * 40,
    )
    new = model_repo(
        "org/pinned",
        {"num_hidden_layers": 9, "num_attention_heads": 4, "hidden_size": 64},
        {},
        sha="b" * 40,
    )
    repo = old
    repo.commits.update(new.commits)
    repo.refs = {"main": "b" * 40, "v1": "a" * 40}
    hub.add(repo)
    at_tag = fetch_repo_facts("org/pinned", "v1", env_for(hub))
    assert isinstance(at_tag, HubFacts)
    assert at_tag.revision == "a" * 40 and at_tag.config["num_hidden_layers"] == 2
    assert at_tag.label == f"Hugging Face Hub org/pinned@{'a' * 12} (v1)"
    main = fetch_repo_facts("org/pinned", None, env_for(hub))
    assert isinstance(main, HubFacts) and main.config["num_hidden_layers"] == 9


def test_facts_are_cached_and_offline_answers_from_the_cache(hub: SimulatedHub) -> None:
    first = fetch_repo_facts(QWEN, None, env_for(hub))
    assert isinstance(first, HubFacts)
    asked = len(hub.requests)
    again = fetch_repo_facts(QWEN, None, env_for(hub, HF_HUB_OFFLINE="1"))
    assert isinstance(again, HubFacts) and again.cached
    assert again.revision == first.revision and again.config == first.config
    assert len(hub.requests) == asked  # offline: not one request
    # A pinned commit never changes: the cache answers without asking either.
    pinned = fetch_repo_facts(QWEN, first.revision, env_for(hub))
    assert isinstance(pinned, HubFacts) and pinned.cached and len(hub.requests) == asked


def test_offline_without_cache_is_a_finding_with_a_remedy(hub: SimulatedHub) -> None:
    got = fetch_repo_facts(QWEN, None, env_for(hub, HF_HUB_OFFLINE="1"))
    assert isinstance(got, Finding) and got.code == "hub_offline"
    assert "HF_HUB_OFFLINE" in got.message and "models sync" in got.remedy
    assert hub.requests == []


def test_gated_without_token_is_a_finding(hub: SimulatedHub) -> None:
    got = fetch_repo_facts(LLAMA, None, env_for(hub))
    assert isinstance(got, Finding) and got.code == "hub_gated", got
    assert "HF_TOKEN" in got.remedy and "licence" in got.remedy
    assert [r.status for r in hub.requests if "/resolve/" in r.path] == [401]


def test_gated_with_a_token_without_access_names_the_token_not_its_value(
    hub: SimulatedHub,
) -> None:
    got = fetch_repo_facts(LLAMA, None, env_for(hub, HF_TOKEN="hf_someoneElsesToken123"))
    assert isinstance(got, Finding) and got.code == "hub_gated"
    assert "HF_TOKEN in use" in got.message
    assert "hf_someoneElsesToken123" not in got.message + got.remedy


def test_gated_with_an_allowed_token_reads_the_facts_and_never_stores_the_token(
    hub: SimulatedHub, capfd: pytest.CaptureFixture[str]
) -> None:
    env = env_for(hub, HF_TOKEN=TOKEN)
    got = fetch_repo_facts(LLAMA, None, env)
    assert isinstance(got, HubFacts), got
    assert got.gated and got.config["num_hidden_layers"] == 80
    assert all(r.authorized for r in hub.requests if "/resolve/" in r.path)
    out, err = capfd.readouterr()
    assert TOKEN not in out + err
    for path in cache_root(env).rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(encoding="utf-8")


def test_missing_repo_revision_and_unreachable_hub_are_findings(hub: SimulatedHub) -> None:
    missing = fetch_repo_facts("org/no-such-model", None, env_for(hub))
    assert isinstance(missing, Finding) and missing.code == "hub_repo_not_found"
    bad_rev = fetch_repo_facts(QWEN, "no-such-branch", env_for(hub))
    assert isinstance(bad_rev, Finding) and bad_rev.code == "hub_revision_not_found"
    closed = fetch_repo_facts(QWEN, None, env_for(hub, HF_ENDPOINT="http://127.0.0.1:9"))
    assert isinstance(closed, Finding) and closed.code == "hub_unreachable"
    assert "127.0.0.1:9" in closed.message and closed.remedy


def test_a_hub_answer_that_makes_no_sense_is_a_finding_not_a_traceback(
    hub: SimulatedHub,
) -> None:
    hub.add(
        SimulatedRepo("org/broken", {"d" * 40: {"config.json": b"{not json"}}, {"main": "d" * 40})
    )
    got = fetch_repo_facts("org/broken", None, env_for(hub))
    assert isinstance(got, Finding) and got.code == "hub_error"
    assert "recipe's metadata" in got.remedy


def test_an_unreachable_hub_falls_back_to_the_cache(hub: SimulatedHub) -> None:
    assert isinstance(fetch_repo_facts(QWEN, None, env_for(hub)), HubFacts)
    got = fetch_repo_facts(QWEN, None, env_for(hub, HF_ENDPOINT="http://127.0.0.1:9"))
    assert isinstance(got, HubFacts) and got.cached


def _glm_nodes_without_the_model() -> list[NodeFacts]:
    nodes = parse_facts((FIXTURES / "simulated_facts_glm53_2x128.json").read_text())
    for n in nodes:
        n.models = []
    return nodes


def test_hub_facts_give_the_fit_check_a_verdict_and_say_where_they_came_from() -> None:
    recipe = find_recipe("glm-5.3-flash")
    nodes = _glm_nodes_without_the_model()
    assert missing_for_fit(resolve_model_facts(recipe, nodes))  # nodes lack the model
    with SimulatedHub([catalogue_repo(GLM, sha=recipe.model_revision)]) as hub:
        got = fetch_model_facts(recipe, env_for(hub))
    assert isinstance(got, HubFacts), got
    facts = resolve_model_facts(recipe, nodes, hub=got)
    argv = render_argv(recipe, apply_overrides(recipe, []))
    report = check_fit(recipe, argv, render_env(recipe), nodes, facts)
    assert report.verdict == "fits", report.to_dict()
    assert facts.sources["num_hidden_layers"].startswith(f"Hugging Face Hub {GLM}@")
    assert "safetensors" in facts.sources["weight_bytes"]


def test_a_node_cache_wins_over_the_hub() -> None:
    recipe = find_recipe("glm-5.3-flash")
    nodes = parse_facts((FIXTURES / "simulated_facts_glm53_2x128.json").read_text())
    hub = HubFacts(GLM, "c" * 40, {"num_hidden_layers": 3}, weight_bytes=1)
    facts = resolve_model_facts(recipe, nodes, hub=hub)
    assert facts.num_hidden_layers != 3 and facts.weight_bytes != 1
    assert facts.sources["num_hidden_layers"].startswith("spark-a's Hugging Face cache")


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_tui", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def test_check_cli_uses_the_hub_when_no_node_has_the_model(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "simulated_facts_glm53_2x128.json").read_text())
    for n in doc["nodes"]:
        n["models"] = []
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(doc))
    recipe = find_recipe("glm-5.3-flash")
    args = ["check", "glm-5.3-flash", "--facts", str(facts_file), "--json"]
    with SimulatedHub([catalogue_repo(GLM, sha=recipe.model_revision)]) as hub:
        run = _cli(args, env_for(hub))
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout)
    # The memory fits; the model is on no node yet (vLLM would fetch it): a warning each.
    assert out["verdict"] == "fits_with_warnings"
    assert {f["code"] for f in out["findings"] if f["severity"] != "info"} == {
        "model_missing_on_node"
    }
    assert out["facts_sources"]["num_attention_heads"].startswith(f"Hugging Face Hub {GLM}@")
    assert "Traceback" not in run.stderr
    # Offline, with a fresh cache: a finding with a remedy, exit 1, no traceback.
    fresh = env_for(hub, HF_HUB_OFFLINE="1", SPARK_TUI_CACHE_DIR=str(tmp_path / "empty"))
    offline = _cli(args, fresh)
    assert offline.returncode == 1 and "Traceback" not in offline.stderr
    codes = [f["code"] for f in json.loads(offline.stdout)["findings"]]
    assert "hub_offline" in codes


def test_huggingface_hub_is_imported_only_when_the_hub_is_asked() -> None:
    code = (
        "import sys, spark_tui.commands.check, spark_tui.remote.hub; "
        "assert 'huggingface_hub' not in sys.modules, 'imported eagerly'"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr


def test_the_demo_hub_serves_the_catalogue_at_the_simulated_nodes_revisions() -> None:
    from spark_tui.sim.hub import catalogue_hub
    from spark_tui.sim.nodes.hf_cache import bundled_models, revision_of

    pinned = dict(bundled_models())
    with catalogue_hub(token=TOKEN) as hub:
        env = env_for(hub)
        got = fetch_repo_facts(GLM, None, env)
        assert isinstance(got, HubFacts), got
        assert got.revision == revision_of(GLM, pinned.get(GLM))  # as the node caches hold it
        assert isinstance(fetch_repo_facts(LLAMA, None, env), Finding)  # gated, no token
        assert isinstance(fetch_repo_facts(LLAMA, None, env_for(hub, HF_TOKEN=TOKEN)), HubFacts)


def test_the_demo_hub_runs_as_a_command() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_tui.sim.hub"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("HF_ENDPOINT=http://127.0.0.1:")
        env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
        env["HF_ENDPOINT"] = line.split("=", 1)[1]
        got = fetch_repo_facts(QWEN, None, env)
        assert isinstance(got, HubFacts) and got.config == catalogue.hf_config(QWEN)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_simulated_hub_lists_a_tree_as_list_repo_tree_reads_it() -> None:
    """The tree API (what `snapshot_download` and `hf download` list a commit with): files
    with sizes and LFS facts, folders, one level or all of them."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile, RepoFolder

    from spark_tui.sim.hub.repos import SafetensorsFile

    shards = {"model.safetensors": SafetensorsFile(("w",), 4096)}
    repo = model_repo("sim-org/tree", {"model_type": "qwen2"}, shards, extra={"a/b/c.txt": b"x"})
    with SimulatedHub([repo]) as hub:
        api = HfApi(endpoint=hub.endpoint)
        top = {e.path: e for e in api.list_repo_tree("sim-org/tree")}
        every = {e.path: e for e in api.list_repo_tree("sim-org/tree", recursive=True)}
        under = [e.path for e in api.list_repo_tree("sim-org/tree", path_in_repo="a")]
    assert set(top) == {"a", "config.json", "model.safetensors"}
    assert isinstance(top["a"], RepoFolder)
    weights = top["model.safetensors"]
    assert isinstance(weights, RepoFile) and weights.size == 4096
    assert weights.lfs is not None and weights.lfs.size == 4096
    assert set(every) == {"a", "a/b", "a/b/c.txt", "config.json", "model.safetensors"}
    assert under == ["a/b"]


def test_the_shard_headers_say_which_encoders_the_checkpoint_holds(
    hub: SimulatedHub, tmp_path: Path
) -> None:
    # An audio_config added to a model without audio: vLLM builds the tower the shards lack.
    from spark_tui.core.encoder_weights import gemma4_audio_params
    from spark_tui.core.model_facts import facts_from_hub
    from spark_tui.sim.hub.repos import SafetensorsFile

    config = json.loads(
        (FIXTURES / "constructed_aeon_gemma4_26b_a4b_nvfp4_config.json").read_text()
    )
    lm = ("model.language_model.embed_tokens.weight", "model.language_model.norm.weight")
    towers = ("model.vision_tower.patch_embedder.input_proj.weight", "model.embed_vision.w")
    audio = ("model.audio_tower.output_proj.weight", "model.embed_audio.embedding_projection.w")
    shards = {
        "model-00001-of-00002.safetensors": SafetensorsFile(lm, 1 << 20),
        "model-00002-of-00002.safetensors": SafetensorsFile(towers, 1 << 20),
    }
    hub.add(model_repo("org/no-audio", config, shards))
    with_audio = {
        **shards,
        "model-00002-of-00002.safetensors": SafetensorsFile(towers + audio, 1 << 20),
    }
    hub.add(model_repo("org/with-audio", config, with_audio))
    env = env_for(hub, SPARK_TUI_CACHE_DIR=str(tmp_path))
    lacking = fetch_repo_facts("org/no-audio", None, env)
    holding = fetch_repo_facts("org/with-audio", None, env)
    assert isinstance(lacking, HubFacts) and isinstance(holding, HubFacts)
    assert lacking.modules == ("model.embed_vision", "model.language_model", "model.vision_tower")
    assert holding.modules == (
        "model.audio_tower",
        "model.embed_audio",
        "model.embed_vision",
        "model.language_model",
        "model.vision_tower",
    )
    tower = gemma4_audio_params(config["audio_config"], 2816)
    assert tower
    assert facts_from_hub("org/no-audio", lacking).unbacked_encoder_bytes == tower * 2
    assert facts_from_hub("org/with-audio", holding).unbacked_encoder_bytes is None
    # The same checkpoints in a node's cache (the probe reads their index's modules): the same
    # encoders, so the fit check gives one answer whether it asked the Hub or the node.
    for repo, hub_facts in (("org/no-audio", lacking), ("org/with-audio", holding)):
        cached = CachedModel(
            repo_id=repo, config=config, weight_bytes=2 << 20, modules=list(hub_facts.modules)
        )
        node = NodeFacts(name="spark-a", address="10.0.0.1", models=[cached])
        from_node = facts_from_nodes(repo, [node])
        from_hub = facts_from_hub(repo, hub_facts)
        assert from_node is not None
        assert from_node.unbacked_encoder_bytes == from_hub.unbacked_encoder_bytes, repo
        assert from_node.encoder_bytes == from_hub.encoder_bytes, repo
        if from_node.unbacked_encoder_bytes:
            assert "spark-a's Hugging Face cache" in from_node.sources["unbacked_encoder_bytes"]
    # The cache keeps what the headers said.
    again = fetch_repo_facts("org/no-audio", None, {**env, "HF_HUB_OFFLINE": "1"})
    assert isinstance(again, HubFacts) and again.cached and again.modules == lacking.modules

"""The model on every node, from the probe's facts (pure): gaps, revisions, disk, and what a
copy sends; and the probe's per-file listing of a snapshot."""

from __future__ import annotations

from spark_tui.core.facts import GIB, CachedModel, NodeFacts
from spark_tui.core.model_presence import (
    FileCopy,
    ModelNeed,
    files_to_copy,
    model_needs,
    presence,
    presence_findings,
)
from spark_tui.core.recipe import Recipe
from spark_tui.remote import parsers as p

REPO = "org/model"
REV = "a" * 40
FILES = {
    "config.json": 700,
    "model-00001-of-00002.safetensors": 5 * GIB,
    "model-00002-of-00002.safetensors": 3 * GIB,
}


def node(name: str, *models: CachedModel, free: int | None = 100 * GIB) -> NodeFacts:
    return NodeFacts(name=name, address=name, models=list(models), disk_free_bytes=free)


def cached(files: dict[str, int], rev: str = REV) -> CachedModel:
    return CachedModel(
        repo_id=REPO,
        revision=rev,
        files=files,
        shards=sorted(f for f in FILES if f.endswith(".safetensors")),
    )


def findings(nodes: list[NodeFacts], offline: bool = False, **kw):
    res = presence(ModelNeed("model", REPO, kw.get("pin")), nodes)
    return res, presence_findings("tiny", [res], nodes, offline=offline, where="--hosts a,b")


def test_complete_everywhere_has_no_finding() -> None:
    res, found = findings([node("a", cached(FILES)), node("b", cached(FILES))])
    assert (
        found == []
        and [n.node for n in res.nodes if n.complete] == ["a", "b"]
        and res.source == "a"
    )


def test_missing_node_is_a_warning_naming_the_node_and_the_sync_command() -> None:
    res, found = findings([node("a", cached(FILES)), node("b")])
    assert [(f.severity, f.code) for f in found] == [("warning", "model_missing_on_node")]
    assert found[0].message.startswith("b has no copy of org/model at aaaaaaaaaaaa")
    assert "8.0 GiB to fetch" in found[0].message
    assert "spark-tui models sync tiny --hosts a,b" in found[0].remedy
    _, offline = findings([node("a", cached(FILES)), node("b")], offline=True)
    assert offline[0].severity == "error"


def test_a_cut_shard_is_incomplete_and_a_missing_shard_is_named() -> None:
    short = {**FILES, "model-00002-of-00002.safetensors": GIB}
    _, found = findings([node("a", cached(FILES)), node("b", cached(short))])
    assert [f.code for f in found] == ["model_incomplete"]
    assert "model-00002-of-00002.safetensors" in found[0].message
    assert "2.0 GiB to fetch" in found[0].message
    # No reference with every shard: a node's own index still says one is missing.
    lacking = {k: v for k, v in FILES.items() if "00002" not in k}
    _, found = findings([node("a", cached(lacking)), node("b", cached(lacking))])
    assert [f.code for f in found] == ["model_incomplete", "model_incomplete"]


def test_other_revision_and_no_disk() -> None:
    other = "b" * 40
    _, found = findings([node("a", cached(FILES)), node("b", cached(FILES, other), free=GIB)])
    assert [f.code for f in found] == ["model_revision_differs", "model_no_disk"]
    assert "only at bbbbbbbbbbbb" in found[0].message
    assert found[1].severity == "error" and "1.0 GiB free" in found[1].message


def test_pinned_revision_short_prefix_matches() -> None:
    res, found = findings([node("a", cached(FILES)), node("b", cached(FILES))], pin="aaaaaaa")
    assert found == [] and res.revision == "aaaaaaa"


def test_files_to_copy_skips_complete_and_resumes_partial() -> None:
    src = {"a": 10, "b": 20, "c": 30}
    plan = files_to_copy(src, {"a": 10, "b": 5}, {"b": 7, "c": 40})
    assert plan == [FileCopy("b", 20, 7), FileCopy("c", 30, 0)]
    assert [f.remaining for f in plan] == [13, 30]


def test_model_needs_include_the_draft_model() -> None:
    recipe = Recipe(name="r", model=REPO, command="vllm serve {model}", model_revision=REV)
    argv = [
        "vllm",
        "serve",
        REPO,
        "--speculative-config",
        '{"model": "org/draft", "num_speculative_tokens": 2}',
    ]
    assert model_needs(recipe, argv) == [
        ModelNeed("model", REPO, REV),
        ModelNeed("draft", "org/draft"),
    ]
    mtp = ["vllm", "serve", REPO, "--speculative-config", '{"method": "mtp"}']
    assert model_needs(recipe, mtp) == [ModelNeed("model", REPO, REV)]
    local = ["vllm", "serve", REPO, "--speculative-config", '{"model": "/models/draft"}']
    assert model_needs(recipe, local) == [ModelNeed("model", REPO, REV)]


def test_scan_lists_files_and_fills_in_cut_shard_names() -> None:
    snap = f"/h/.cache/huggingface/hub/models--org--model/snapshots/{REV}"
    scan = (
        f"--- snapshot {snap}\n700 {snap}/config.json\n5 {snap}/model-00001-of-00003.safetensors\n"
        f"==> {snap}/config.json <==\n{{}}\n\n==> {snap}/model.safetensors.index.json <==\n"
        '{"metadata": {"total_size": 10}, "weight_map": {"x": "model-00001-of-00003.safetensors", "y": "mod'
    )
    (m,) = p.parse_hf_cache_scan(scan)
    assert m.files == {"config.json": 700, "model-00001-of-00003.safetensors": 5}
    assert m.shards == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]


def test_copies_without_file_lists_or_revisions_are_taken_as_present() -> None:
    # An older facts file: only that the model is there is known.
    bare = CachedModel(repo_id=REPO)
    _, found = findings([node("a", bare), node("b", bare)])
    assert found == []


def test_check_names_a_node_without_the_model(tmp_path, capsys) -> None:
    import json
    from pathlib import Path

    from spark_tui import cli

    data = json.loads(
        (Path(__file__).parent.parent / "fixtures" / "simulated_facts_glm53_2x128.json").read_text()
    )
    data["nodes"][1]["models"] = []
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(data))
    cli.main(["check", "glm-5.3-flash", "--facts", str(facts), "--json"])
    doc = json.loads(capsys.readouterr().out)
    gaps = [f for f in doc["findings"] if f["code"] == "model_missing_on_node"]
    assert len(gaps) == 1 and gaps[0]["message"].startswith("spark-b has no copy of")
    assert "spark-tui models sync glm-5.3-flash" in gaps[0]["remedy"]


def test_a_model_gap_sets_the_verdict_and_the_exit_code(tmp_path, capsys, monkeypatch) -> None:
    # A node without the model is a warning online (vLLM would fetch it there) and an error
    # offline (vLLM would stop): the verdict and the exit status say so, never "fits".
    import json
    from pathlib import Path

    from spark_tui import cli

    data = json.loads(
        (Path(__file__).parent.parent / "fixtures" / "simulated_facts_glm53_2x128.json").read_text()
    )
    data["nodes"][1]["models"] = []
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(data))
    code = cli.main(["check", "glm-5.3-flash", "--facts", str(facts), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert [f["severity"] for f in doc["findings"] if f["code"] == "model_missing_on_node"] == [
        "warning"
    ]
    assert doc["verdict"] == "fits_with_warnings" and code == 0

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = cli.main(["check", "glm-5.3-flash", "--facts", str(facts)])
    out = capsys.readouterr().out
    assert "verdict   does not fit" in out and "error   model_missing_on_node" in out
    assert code == 1

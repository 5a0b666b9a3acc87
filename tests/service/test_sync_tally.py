"""What a sync did per node (SyncTally) from its events, and the fit findings a sync fixes."""

from __future__ import annotations

from spark_tui.core.facts import CachedModel, ImageInfo, NodeFacts
from spark_tui.core.recipe import Recipe
from spark_tui.ops.events import Notice
from spark_tui.service.events import SyncDone, SyncFinished, SyncProgress, SyncStarted, SyncStep
from spark_tui.service.gaps import gap_findings
from spark_tui.service.sync import IMAGE, MODELS, SyncTally

M = "org/model"


def test_progress_then_done_then_a_node_that_failed() -> None:
    t = SyncTally()
    t.apply(SyncStarted(MODELS, "r", (M,), ("a", "b", "c")))
    t.apply(SyncStep("a", M, "check", "a has org/model complete: the source"))
    t.apply(SyncStep("b", M, "copy", "a -> b"))
    t.apply(SyncProgress("b", M, "copy", 500, 1000, 100.0, 5.0))
    row = t.row("b", M)
    assert (row.state, row.fraction, row.eta_seconds) == ("copy", 0.5, 5.0)
    t.apply(SyncDone("b", M, 1000, 1, "a", 10.0))
    t.apply(Notice("error", "c: org/model: 3 GB to receive, 1 GB free", "free disk on c"))
    t.apply(SyncFinished(False, (M,), ("c",)))
    assert t.done and not t.ok
    assert t.row("a", M).outcome == "has it: the source for the others"
    assert t.row("b", M).outcome == "copied from a: 0.00 GB in 10 s, 1 file(s) already complete"
    c = t.row("c", M)
    assert c.state == "failed" and c.error == "3 GB to receive, 1 GB free"
    assert c.remedy == "free disk on c"
    assert t.to_dict()["failed_nodes"] == ["c"]


def test_an_error_naming_no_node_fails_the_failed_nodes_rows() -> None:
    t = SyncTally()
    t.apply(SyncStarted(IMAGE, "r", ("img:1",), ("a", "b")))
    t.apply(Notice("error", "no node has img:1 and a could not pull it", "build it on a"))
    t.apply(SyncFinished(False, ("img:1",), ("a", "b")))
    assert [r.state for r in t.rows.values()] == ["failed", "failed"]
    assert t.row("b", "img:1").remedy == "build it on a"


def test_a_sync_that_stopped_fails_every_row_it_never_got_to_with_its_own_items_error() -> None:
    """The Hub could not be reached for either model: the head's rows were "downloading",
    the worker's "waiting"; once the sync has finished none of them stays so, and each row
    says its own model's error."""
    d = "org/draft"
    t = SyncTally()
    t.apply(SyncStarted(MODELS, "r", (M, d), ("a", "b")))
    t.apply(SyncStep("a", M, "download", "a has no Hub CLI (hf): downloading org/model here"))
    t.apply(Notice("error", f"{M}: could not reach the Hub (ConnectError)", "check the network"))
    t.apply(SyncStep("a", d, "download", "a has no Hub CLI (hf): downloading org/draft here"))
    t.apply(Notice("error", f"{d}: could not reach the Hub (ReadTimeout)", "check the network"))
    t.apply(SyncFinished(False, (M, d), ("a",)))
    assert t.done and not t.ok
    assert {k: r.state for k, r in t.rows.items()} == {
        ("a", M): "failed",
        ("a", d): "failed",
        ("b", M): "failed",
        ("b", d): "failed",
    }
    assert t.row("a", M).error == t.row("b", M).error == "could not reach the Hub (ConnectError)"
    assert t.row("b", d).outcome == "failed: could not reach the Hub (ReadTimeout)"
    assert t.row("b", d).remedy == "check the network"


def _node(name: str, files: dict[str, int] | None, image_id: str | None) -> NodeFacts:
    models = [CachedModel(repo_id=M, revision="abc1234", files=files)] if files else []
    images = [ImageInfo(ref="img:1", id=image_id)] if image_id else []
    other = [ImageInfo(ref="other:2", id="sha256:" + "9" * 64)]
    return NodeFacts(name=name, address=name, models=models, images=images + other)


def test_gaps_are_warnings_naming_the_remedy_given() -> None:
    recipe = Recipe(name="r", model=M, command="vllm serve {model}", container="img:1")
    full = {"config.json": 10, "model.safetensors": 1000}
    nodes = [
        _node("a", full, "sha256:" + "1" * 64),
        _node("b", {"config.json": 10, "model.safetensors": 10}, "sha256:" + "2" * 64),
        _node("c", None, None),
    ]
    found = gap_findings(recipe, ["vllm", "serve", M], {}, nodes, "press m to sync")
    codes = sorted((f.code, f.message.split()[0]) for f in found)
    assert codes == [
        ("image_differs", "b"),
        ("image_missing_on_node", "c"),
        ("model_incomplete", "b"),
        ("model_missing_on_node", "c"),
    ]
    assert all(f.remedy == "press m to sync" for f in found)
    assert {f.severity for f in found} == {"warning"}  # vLLM would fetch them on its own

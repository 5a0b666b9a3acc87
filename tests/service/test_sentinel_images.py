"""A sentinel image is resolved before the launch, against a real registry server (Debian's
docker-registry on a loopback port): the plan's ranks run the newest nightly's tag, the run
record keeps tag and digest, a node holding another digest is named before any rank
starts, and a registry that cannot be reached refuses the launch with a remedy. The nodes
and their engines are the SIMULATED ones of engine_session."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_session import EngineNodes, EngineSession

from spark_tui.core.errors import OperationFailed
from spark_tui.core.facts import ImageInfo, NodeFacts
from spark_tui.core.images import NIGHTLY_REPOSITORY
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service import events as ev

SENTINEL = "ghcr.io/spark-arena/dgx-vllm-eugr-nightly-tf5:latest"
NEWEST = f"{NIGHTLY_REPOSITORY}:2026-12-02"
RECIPE = "nightly-recipe"


@pytest.fixture
def recipe_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user recipe naming the -tf5 sentinel."""
    config = tmp_path / "config"
    folder = config / "spark-tui" / "recipes"
    folder.mkdir(parents=True)
    recipe = {
        "recipe_version": "2",
        "name": RECIPE,
        "model": "Qwen/Qwen3-0.6B",
        "runtime": "vllm",
        "container": SENTINEL,
        "min_nodes": 2,
        "max_nodes": 2,
        "defaults": {"port": 8000, "tensor_parallel": 2},
        "command": "vllm serve {model} --port {port} -tp {tensor_parallel}",
    }
    (folder / f"{RECIPE}.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return folder


class HeldImages(EngineNodes):
    """spark-a holds the newest nightly; spark-b holds another build under the same tag."""

    digests: dict[str, str] = {}

    async def probe(self) -> list[NodeFacts]:
        a, b = await super().probe()
        return [
            dataclasses.replace(a, images=[ImageInfo(NEWEST, "sha256:1a", self.digests["a"])]),
            dataclasses.replace(b, images=[ImageInfo(NEWEST, "sha256:2b", self.digests["b"])]),
        ]


async def _launch(session: EngineSession) -> tuple[list[Any], OperationFailed | None]:
    seen: list[Any] = []
    raised = None
    try:
        async for event in session.launch(find_recipe(RECIPE), {}, insist=True, follow=False):
            if isinstance(event, ev.Question):
                event.reply(False)
            seen.append(event)
    except OperationFailed as exc:
        raised = exc
    finally:
        await session.close()
    return seen, raised


def _created(seen: list[Any]) -> list[int]:
    return [
        i
        for i, e in enumerate(seen)
        if isinstance(e, ev.RankStateChanged) and e.state is ev.RankState.CREATED
    ]


async def test_a_node_with_another_digest_is_named_before_any_rank_starts(
    local_registry: tuple[str, dict[str, str]],
    recipe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, digests = local_registry
    monkeypatch.setenv("SPARK_TUI_REGISTRY_ENDPOINTS", f"ghcr.io={base}")
    nodes = HeldImages(tmp_path / "logs")
    nodes.digests = {"a": digests["new"], "b": digests["old"]}
    session = EngineSession(tmp_path / "logs", nodes)
    seen, raised = await _launch(session)
    assert raised is None
    evaluated = next(i for i, e in enumerate(seen) if isinstance(e, ev.Evaluated))
    assert evaluated < _created(seen)[0]
    evaluation = seen[evaluated].evaluation
    gaps = [f for f in evaluation.report.findings if f.code.startswith("image_")]
    new, old = (d.removeprefix("sha256:")[:12] for d in (digests["new"], digests["old"]))
    assert [(f.code, f.message) for f in gaps] == [
        (
            "image_differs",
            f"spark-b has another {NEWEST} ({old}, the registry's is {new}): the launch pulls "
            "it again",
        )
    ]
    plan = evaluation.plan
    assert [r.container.image for r in plan.ranks] == [NEWEST, NEWEST]
    assert {r.container.labels["spark-tui.image-digest"] for r in plan.ranks} == {digests["new"]}
    [run] = session.history.list_runs("launch")
    assert run.image == NEWEST
    assert run.image_resolved == {
        "requested": SENTINEL,
        "image": NEWEST,
        "tag": "2026-12-02",
        "digest": digests["new"],
    }


async def test_an_unreachable_registry_refuses_the_launch_with_a_remedy(
    recipe_dir: Path, tmp_path: Path
) -> None:
    # tests/conftest.py points ghcr.io at a closed port.
    seen, raised = await _launch(EngineSession(tmp_path / "logs"))
    assert raised is not None and not _created(seen)
    assert raised.message.startswith(
        f"launch refused: {SENTINEL} stands for the newest published nightly, which could not "
        "be resolved: cannot reach the registry ghcr.io (http://127.0.0.1:9)"
    )
    assert "SPARK_TUI_REGISTRY_ENDPOINTS=ghcr.io=URL" in raised.remedy


def test_plan_shows_the_tag_and_digest(
    local_registry: tuple[str, dict[str, str]], recipe_dir: Path, tmp_path: Path
) -> None:
    base, digests = local_registry
    facts = Path(__file__).parents[1] / "fixtures" / "simulated_facts_glm53_2x128.json"
    env_args = [sys.executable, "-m", "spark_tui", "plan", RECIPE, "--facts", str(facts)]
    import os

    env = {**os.environ, "SPARK_TUI_REGISTRY_ENDPOINTS": f"ghcr.io={base}"}
    text = subprocess.run(env_args, env=env, capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    assert (
        f"image     {NEWEST}  {digests['new']}  (the newest nightly for {SENTINEL})"
        in text.stdout.splitlines()
    )
    assert text.stdout.count(f"  image     {NEWEST}\n  digest    {digests['new']}\n") == 2
    doc = json.loads(
        subprocess.run(
            [*env_args, "--json"], env=env, capture_output=True, text=True, timeout=60
        ).stdout
    )
    assert doc["image_resolved"]["digest"] == digests["new"]
    assert {r["image"] for r in doc["ranks"]} == {NEWEST}


def test_the_head_builds_the_flag_table_of_the_nightly_not_of_latest() -> None:
    from spark_tui.core.images import ResolvedImage
    from spark_tui.service.images import ImageAnswers

    answers = ImageAnswers()
    assert answers.runs(SENTINEL) is None  # not resolved yet: `latest` is not what runs
    answers.answers[SENTINEL] = ResolvedImage(SENTINEL, NEWEST, "2026-12-02", "sha256:" + "0" * 64)
    assert answers.runs(SENTINEL) == NEWEST
    assert (
        answers.runs("nvcr.io/nvidia/vllm:26.05.post1-py3") == "nvcr.io/nvidia/vllm:26.05.post1-py3"
    )
    # Simulated Sparks: every image as written.
    assert ImageAnswers(enabled=False).runs(SENTINEL) == SENTINEL


async def test_an_image_sync_puts_the_newest_nightly_on_the_nodes(
    local_registry: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_tui.service.images import ImageAnswers

    assert await ImageAnswers().to_run("nvcr.io/nvidia/vllm:1") == "nvcr.io/nvidia/vllm:1"
    with pytest.raises(OperationFailed) as err:
        await ImageAnswers().to_run(SENTINEL)  # ghcr.io is a closed port here
    assert "SPARK_TUI_REGISTRY_ENDPOINTS" in err.value.remedy
    monkeypatch.setenv("SPARK_TUI_REGISTRY_ENDPOINTS", f"ghcr.io={local_registry[0]}")
    assert await ImageAnswers().to_run(SENTINEL) == NEWEST

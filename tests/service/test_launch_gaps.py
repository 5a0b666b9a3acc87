"""The launch says, before anything starts, each node that lacks the model (as `check` and
the cockpit's fit panel say it): a warning online (vLLM would download it there), a refusal
offline (vLLM would stop), with the sync command for these nodes as the remedy. The nodes
and their engines are the SIMULATED ones of engine_session."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from engine_session import EngineNodes, EngineSession

from spark_tui.core.errors import OperationFailed
from spark_tui.core.facts import CachedModel, NodeFacts
from spark_tui.core.model_presence import model_needs
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service import events as ev
from spark_tui.sim.engine import catalogue

RECIPE = "glm-5.3-flash"
FILES = {"config.json": 1200, "model-00001-of-00001.safetensors": 4096}


class HalfCached(EngineNodes):
    """spark-a has the recipe's model complete in its cache; spark-b has none of it."""

    async def probe(self) -> list[NodeFacts]:
        facts = await super().probe()
        repo = model_needs(find_recipe(RECIPE))[0].repo_id
        spec = catalogue.lookup(repo)
        assert spec is not None
        cached = CachedModel(
            repo,
            revision="a" * 40,
            size_bytes=sum(FILES.values()),
            weight_bytes=spec.weight_bytes,
            config=catalogue.hf_config(repo),  # the SIMULATED catalogue's facts of the model
            files=FILES,
        )
        return [dataclasses.replace(facts[0], models=[cached]), facts[1]]


async def _launch(
    session: EngineSession, insist: bool | None, reply: bool | None = False
) -> tuple[list[Any], Any]:
    """Launch; a question is answered `reply` (None: left unanswered, as a headless run
    without a terminal leaves it)."""
    seen: list[Any] = []
    raised = None
    try:
        async for event in session.launch(find_recipe(RECIPE), {}, insist=insist, follow=False):
            if isinstance(event, ev.Question) and reply is not None:
                event.reply(reply)
            seen.append(event)
    except OperationFailed as exc:
        raised = exc
    finally:
        await session.close()
    return seen, raised


def _gaps(seen: list[Any]) -> list[Any]:
    (evaluated,) = [e for e in seen if isinstance(e, ev.Evaluated)]
    report = evaluated.evaluation.report
    assert report is not None
    return [f for f in report.findings if f.code.startswith("model_")]


async def test_offline_a_node_without_the_model_refuses_the_launch_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    session = EngineSession(tmp_path / "sim", HalfCached(tmp_path / "sim"))
    session.where = "--hosts spark-a,spark-b"
    seen, refused = await _launch(session, insist=None)
    assert refused is not None
    # What was decided and why, in the error itself, and how to insist.
    assert refused.message.startswith(
        f"not launching {RECIPE}: it does not fit (spark-b has no copy of"
    ), refused.message
    assert refused.message.endswith("; launching anyway was declined"), refused.message
    assert "models sync" in refused.remedy and "--force" in refused.remedy
    assert session.nodes.argvs == [], "no rank was started"
    (gap,) = _gaps(seen)
    assert gap.severity == "error" and gap.code == "model_missing_on_node"
    assert gap.message.startswith("spark-b has no copy of"), gap.message
    assert gap.remedy.startswith(f"run `spark-tui models sync {RECIPE} --hosts spark-a,spark-b`")
    (question,) = [e for e in seen if isinstance(e, ev.Question) and e.kind == ev.INSIST]
    assert "spark-b has no copy of" in question.text and "models sync" in question.text


async def test_online_a_node_without_the_model_is_a_warning_and_the_launch_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    session = EngineSession(tmp_path / "sim", HalfCached(tmp_path / "sim"))
    session.sync_hint = "press m to sync"
    seen, refused = await _launch(session, insist=None)
    missing = [e.evaluation.report.missing for e in seen if isinstance(e, ev.Evaluated)]
    assert refused is None, (refused, missing)
    assert len(session.nodes.argvs) == 1, "the ranks were started"
    (gap,) = _gaps(seen)
    assert gap.severity == "warning" and gap.message.startswith("spark-b has no copy of")
    assert gap.remedy == "press m to sync", "the interface's own way to sync"
    assert not any(isinstance(e, ev.Question) and e.kind == ev.INSIST for e in seen)


async def test_a_refusal_no_one_was_asked_about_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    session = EngineSession(tmp_path / "sim", HalfCached(tmp_path / "sim"))
    seen, refused = await _launch(session, insist=None, reply=None)
    assert refused is not None and session.nodes.argvs == []
    assert refused.message.startswith(f"not launching {RECIPE}: it does not fit ("), refused
    assert refused.message.endswith("; no terminal could confirm launching anyway"), refused
    assert refused.remedy.endswith("or pass --force to launch anyway"), refused.remedy

"""The launch runs the image's flag check (as `check` does) before any container is created:
a flag the engine's vLLM does not know, or a value outside a flag's choices, refuses the
launch naming the flag and the image, and --force does not skip it. The session's flag seam
asks the SIMULATED engine's own `vllm serve --help=all` here (see engine_session); the lab
tests ask the image on the head."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from engine_session import EngineNodes, EngineSession

from spark_tui.core.errors import OperationFailed
from spark_tui.core.fit import Finding
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops.events import Emit, Notice
from spark_tui.service import events as ev


async def collect_into(seen: list[Any], events: Any) -> None:
    """Every event into `seen`; questions answered yes (the user insists, as --force does)."""
    async for event in events:
        if isinstance(event, ev.Question):
            event.reply(True)
        seen.append(event)


def with_extra(words: str) -> Any:
    recipe = find_recipe("glm-5.3-flash")
    return dataclasses.replace(recipe, command=recipe.command.rstrip() + f" {words}\n")


@pytest.mark.parametrize(
    ("extra", "code", "named"),
    [
        ("--enable-prefix-cachin", "unknown_flag", "did you mean --enable-prefix-caching?"),
        ("--dtype float33", "flag_value", "'float33' is not one of its choices"),
    ],
)
async def test_a_flag_the_engine_refuses_blocks_the_launch_even_when_insisting(
    tmp_path: Path, extra: str, code: str, named: str
) -> None:
    recipe = with_extra(extra)
    session = EngineSession(tmp_path / "sim")
    seen: list[Any] = []
    try:
        with pytest.raises(OperationFailed) as refused:
            await collect_into(seen, session.launch(recipe, {}, insist=True, follow=False))
    finally:
        await session.close()
    assert session.nodes.argvs == [], "no rank was started"
    assert not any(isinstance(e, ev.RankStateChanged) for e in seen)
    image = recipe.container
    assert image
    msg = refused.value.message
    assert extra.split()[0] in msg and image in msg and named in msg, msg
    assert "--force does not skip this" in refused.value.remedy
    # The finding is the fit report's too (the cockpit's fit panel and the CLI show it).
    (evaluated,) = [e for e in seen if isinstance(e, ev.Evaluated)]
    report = evaluated.evaluation.report
    assert report is not None and report.verdict == "does_not_fit"
    assert [f.code for f in report.findings if f.severity == "error"] == [code]
    # Nothing asked the user to insist: the refusal comes first.
    assert not any(isinstance(e, ev.Question) and e.kind == ev.INSIST for e in seen)


async def test_the_flags_the_plan_adds_to_the_workers_are_checked_too(tmp_path: Path) -> None:
    from spark_tui.ops.image_flags import serve_argvs

    session = EngineSession(tmp_path / "sim")
    await collect_into([], session.probe())  # the double's nodes
    evaluation = session.evaluate(find_recipe("glm-5.3-flash"), {})
    await session.close()
    assert evaluation.plan is not None
    argvs = serve_argvs(evaluation.plan)
    assert len(argvs) == 2 and "--headless" in argvs[1] and "--headless" not in argvs[0]
    found = await session.nodes.image_flags(evaluation.plan, pull=False, emit=None)
    assert found == []


class NotPulledYet(EngineNodes):
    """The image is not on the head at first: the flag check can only run once the launch
    has pulled it there (`pull` given); whether each call pulls is recorded."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir)
        self.pulls: list[bool] = []

    async def image_flags(
        self, plan: Any, *, pull: bool, emit: Emit[Notice] | None, wait: bool = True
    ) -> list[Finding]:
        self.pulls.append(pull)
        if not pull:
            return [Finding("info", "image_not_pulled", "not on the head yet", "pull it")]
        return await super().image_flags(plan, pull=pull, emit=emit, wait=wait)


async def test_an_image_not_on_the_head_is_pulled_then_checked_before_any_container(
    tmp_path: Path,
) -> None:
    session = EngineSession(tmp_path / "bad", NotPulledYet(tmp_path / "bad"))
    seen: list[Any] = []
    try:
        with pytest.raises(OperationFailed) as refused:
            recipe = with_extra("--enable-prefix-cachin")
            await collect_into(seen, session.launch(recipe, {}, insist=True, follow=False))
    finally:
        await session.close()
    assert session.nodes.pulls == [False, True] and session.nodes.argvs == []
    assert "--enable-prefix-cachin" in refused.value.message

    good = EngineSession(tmp_path / "good", NotPulledYet(tmp_path / "good"))
    try:
        await collect_into([], good.launch(find_recipe("glm-5.3-flash"), {}, follow=False))
    finally:
        await good.close()
    assert good.nodes.pulls == [False, True] and len(good.nodes.argvs) == 1


def test_the_flag_tables_are_kept_per_image_id_under_spark_tui_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_tui.ops.image_flags import cached_help, store_help

    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path))
    image_id = "sha256:" + "ab" * 32
    assert cached_help(image_id) is None
    store_help(image_id, "usage: vllm serve\n  --dtype {auto,float32}\n")
    assert (tmp_path / "vllm-serve-help" / f"{'ab' * 32}.txt").is_file()
    assert cached_help(image_id) == "usage: vllm serve\n  --dtype {auto,float32}\n"
    assert cached_help("not-an-id") is None

"""Tuning or sweeping a recipe other than the one running is refused, naming both, before
anything is relaunched (on the demo's simulated Sparks)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from spark_tui.core.errors import InputError
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.sweep import Objective
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui.demo_session import DemoSession


async def test_tune_and_sweep_of_another_recipe_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    session = DemoSession(pace=0.05, token_scale=0.05, base_address=random_loopback_base())
    running, other = find_recipe("glm-5.3-flash"), find_recipe("gpt-oss-120b")
    refused: dict[str, InputError] = {}
    seen: list[object] = []
    try:
        await session.start()
        async with contextlib.aclosing(session.launch(running, {}, follow=False)) as events:
            async for _ in events:
                pass
        for verb, events in (
            ("tune", session.tune(other, "max_num_seqs", 4)),
            (
                "sweep",
                session.sweep(other, "max_num_seqs", ["4", "8"], [], Objective.parse("tok_s@c2")),
            ),
        ):
            with pytest.raises(InputError) as caught:
                async with contextlib.aclosing(events) as stream:
                    async for event in stream:
                        seen.append(event)
            refused[verb] = caught.value
        assert session.cluster is not None and session.cluster.recipe == running.name
    finally:
        await session.close()
    assert seen == []  # refused before anything was said, let alone relaunched
    for verb, error in refused.items():
        assert str(error).startswith("the running cluster serves glm-5.3-flash, not gpt-oss-120b")
        assert error.remedy == f"{verb} glm-5.3-flash, or stop it and launch gpt-oss-120b first"

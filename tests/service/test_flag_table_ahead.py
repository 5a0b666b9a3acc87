"""A first launch of an image does not wait for the image's `vllm serve --help=all` after
the fit: the session starts the flag table as soon as it is connected, in the background,
and the evaluation's flag check awaits that same build. Real Session over simulated Sparks
(the stand-in engine answers --help=all in the image); a counting double around the public
seams records when the table was requested, when the check needed it and every help run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.ops import image_flags
from spark_tui.remote import probe as probe_module
from spark_tui.remote.docker_remote import RemoteDocker
from spark_tui.service import events as ev
from spark_tui.service.session import Session
from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base

HELP = "vllm serve --help=all"


class Recorder:
    """What happened when: ("requested", image), ("probed", "") when a probe of the nodes
    ended, ("needed", image),
    ("help", image) and ("help done", image), in order, with their times."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log: list[tuple[str, str, float]] = []
        start, check, call, probe = (
            image_flags.FlagTables.start,
            image_flags.check_image_flags,
            RemoteDocker.call,
            probe_module.probe_pool,
        )

        def started(tables: Any, pool: Any, head: str, image: str, owner: Any = None) -> None:
            self.note("requested", image)
            start(tables, pool, head, image, owner)

        async def checked(pool: Any, head: str, image: str, *a: Any, **kw: Any) -> Any:
            self.note("needed", image)
            return await check(pool, head, image, *a, **kw)

        async def called(docker: Any, fn: Any, what: str) -> Any:
            if what != HELP:
                return await call(docker, fn, what)
            self.note("help", docker.node)
            try:
                return await call(docker, fn, what)
            finally:
                self.note("help done", docker.node)

        async def probed(*a: Any, **kw: Any) -> Any:
            try:
                return await probe(*a, **kw)
            finally:
                self.note("probed", "")

        monkeypatch.setattr(image_flags.FlagTables, "start", started)
        monkeypatch.setattr(probe_module, "probe_pool", probed)
        monkeypatch.setattr(image_flags, "check_image_flags", checked)
        monkeypatch.setattr(RemoteDocker, "call", called)

    def note(self, what: str, detail: str) -> None:
        self.log.append((what, detail, time.monotonic()))

    def first(self, what: str) -> float:
        return next(t for w, _d, t in self.log if w == what)

    def count(self, what: str) -> int:
        return sum(1 for w, _d, _t in self.log if w == what)


async def evaluated_launch(session: Session, recipe: Any, rec: Recorder) -> ev.Evaluated:
    """A launch up to its evaluation (the containers are not the point here)."""
    events = session.launch(recipe, {}, insist=True, replace=True, follow=False)
    async for event in events:
        if isinstance(event, ev.Question):
            event.reply(False)
        elif isinstance(event, ev.Evaluated):
            await events.aclose()  # type: ignore[attr-defined]
            return event
    raise AssertionError("the launch made no evaluation")


async def test_the_flag_table_is_built_while_the_launch_probes_and_once_per_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(tmp_path / "cache"))  # a first launch
    rec = Recorder(monkeypatch)
    recipe = find_recipe("glm-5.3-flash")
    scenario = Scenario(nodes=2, ssh_port=0, base_address=random_loopback_base(), pace=0.02)
    async with SimCluster(scenario) as sim:
        session = Session(sim.inventory)
        try:
            evaluated = await evaluated_launch(session, recipe, rec)
            # The same image with other settings (another flag check): no second help run.
            await session.prepare(recipe, {"max_num_seqs": "8"})
        finally:
            await session.close()
        again = Session(sim.inventory)  # a later session: the table kept on this machine
        try:
            await evaluated_launch(again, recipe, rec)
        finally:
            await again.close()

    report = evaluated.evaluation.report
    assert report is not None
    codes = [f.code for f in report.findings]
    assert "flags_not_checked" not in codes and "image_not_pulled" not in codes, codes
    # Requested as soon as the launch was connected: before the probe ended, so before the
    # evaluation's flag check needed it; that check awaited the same build.
    assert rec.first("requested") < rec.first("probed") < rec.first("needed"), rec.log
    assert rec.count("needed") >= 3, rec.log  # the launch, the other settings, the later one
    assert rec.count("help") == 1, rec.log  # one image: one `vllm serve --help=all`

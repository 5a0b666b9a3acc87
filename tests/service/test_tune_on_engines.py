"""Tuning through the service on the SIMULATED engine: max_num_seqs 2 -> 8 on every rank,
measured with the baseline's benchmark settings and compared (the one path both the CLI
and the cockpit take)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from engine_session import EngineSession
from ops_helpers import FAKE_API_KEY, FAKE_HF_TOKEN, files_containing

from spark_tui import cli
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.workload import Workload
from spark_tui.ops.bench import BenchConfig
from spark_tui.ops.tuning import ranks_carry
from spark_tui.service import events as ev


async def collect(events: Any) -> list[Any]:
    """Every event; questions answered yes (a test stands in for the user)."""
    seen = []
    async for event in events:
        if isinstance(event, ev.Question):
            event.reply(True)
        seen.append(event)
    return seen


def one(seen: list[Any], kind: type) -> Any:
    found = [e for e in seen if isinstance(e, kind)]
    assert len(found) == 1, (kind, found)
    return found[0]


async def test_raising_max_num_seqs_shows_higher_throughput_at_concurrency_8(
    tmp_path: Path, private_data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = BenchConfig(
        concurrency=(8,),
        workload=Workload(prompt_tokens=32, output_tokens=24),
        requests_per_level=16,
    )
    session = EngineSession(tmp_path / "sim", bench_config=config)
    recipe = find_recipe("glm-5.3-flash")
    try:
        await collect(session.launch(recipe, {"max_num_seqs": "2"}, follow=False))
        smoke = one(await collect(session.smoke()), ev.SmokeDone)
        assert smoke.ok, [r.to_dict() for r in smoke.results if not r.ok]
        base = one(await collect(session.bench()), ev.BenchDone)
        seen = await collect(session.tune(recipe, "max_num_seqs", "8", follow=False))
    finally:
        await session.close()
    done = one(seen, ev.Compared)
    # The baseline is the benchmark of the running settings, measured like this one.
    assert done.baseline_id == base.run_id
    assert not any(isinstance(e, ev.Notice) and "measuring the baseline" in e.message for e in seen)
    # The change reached every rank, and only it changed.
    assert all(r[r.index("--max-num-seqs") + 1] == "8" for r in session.nodes.argvs[-1])
    assert all(r[r.index("--max-num-seqs") + 1] == "2" for r in session.nodes.argvs[0])
    history = session.history
    relaunch = history.get_run(done.run_id)
    launch = history.get_run(relaunch.launch_id or "")
    assert ranks_carry({"ranks": launch.commands}, "max_num_seqs", 8) == []
    # A launch's "changed" is against the recipe's defaults (4), not the launch before it.
    assert launch.changed == [{"name": "max_num_seqs", "before": 4, "after": 8}]
    first = history.list_runs("launch")[0]
    assert first.changed == [{"name": "max_num_seqs", "before": 4, "after": 2}]
    assert launch.image_digests and relaunch.changed == launch.changed
    assert done.smoke_ok and done.notes == ()
    assert done.ranks_carrying == tuple(range(len(session.nodes.argvs[-1])))
    cmp = done.comparison
    assert cmp.comparable and cmp.changed == [{"name": "max_num_seqs", "before": 2, "after": 8}]
    tps = cmp.get(8, "total_output_tps")
    assert tps is not None and tps.delta is not None and tps.delta > 0
    assert tps.beyond_noise and tps.better, tps
    # The benchmark after the change used the baseline's exact settings.
    after = history.get_run(done.run_id)
    assert (
        after.results["bench"]["config"] == history.get_run(base.run_id).results["bench"]["config"]
    )
    # The CLI shows the same comparison and exports a secret-free script and report.
    assert cli.main(["history", "compare", base.run_id, done.run_id]) == 0
    shown = capsys.readouterr().out
    assert "changed: max_num_seqs: 2 -> 8" in shown and "total tok/s" in shown
    assert cli.main(["history", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in listed] == ["launch", "smoke", "bench"] * 2
    out = tmp_path / "export"
    assert cli.main(["history", "export", base.run_id, done.run_id, "--out", str(out)]) == 0
    capsys.readouterr()
    script = (out / f"launch-{launch.id}.sh").read_text()
    assert "--max-num-seqs 8" in script and '"${HF_TOKEN:-}"' in script
    report = (out / "report.md").read_text()
    assert "max_num_seqs: 2 -> 8" in report
    for secret in (FAKE_HF_TOKEN, FAKE_API_KEY):
        assert files_containing(private_data_dir, secret) == []
        assert files_containing(out, secret) == []

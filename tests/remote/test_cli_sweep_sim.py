"""Headless `tune --sweep` on simulated Sparks (what `spark-tui sim` runs): three values of
max_num_seqs with the recipe's max_num_batched_tokens removed, one that vLLM refuses at
startup (above the 8192 tokens vLLM 0.32 budgets on a GB10 when the command gives none,
which the fit check cannot know), each value's runs in the history, and the table in --json
and in the history's export. With the recipe's budget of 4096 given, `check` and `launch`
refuse max_num_seqs 8192 alike, and the running cluster is left serving."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from spark_tui import cli
from spark_tui.sim.nodes import SimCluster

BENCH = [
    "--concurrency",
    "2",
    "--requests-per-level",
    "4",
    "--prompt-tokens",
    "16",
    "--output-tokens",
    "8",
]


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(data))
    return data


async def test_sweep_of_three_values_one_refused(sim_scenario, capsys, tmp_path) -> None:
    async with SimCluster(sim_scenario(2)) as sim:
        inv = ["--inventory", str(sim.inventory_path)]
        unset = ["--set", "max_num_batched_tokens=none"]
        code = await asyncio.to_thread(
            cli.main,
            ["launch", "glm-5.3-flash", *inv, *unset, "--wait", "--ready-timeout", "60"],
        )
        assert code == 0, capsys.readouterr().err
        capsys.readouterr()
        await _check_and_launch_refuse_alike(inv, capsys)
        argv = [
            "tune",
            "glm-5.3-flash",
            *inv,
            "--sweep",
            "max_num_seqs=2,16384,8",
            "--target",
            "errors<=0@c2",
            "--maximize",
            "tok_s@c2",
            *BENCH,
            "--json",
        ]
        code = await asyncio.to_thread(cli.main, argv)
        out, err = capsys.readouterr()
        assert code == 0, err
        result = json.loads(out)
        rows = {r["raw"]: r for r in result["rows"]}
        assert list(rows) == ["2", "16384", "8"]
        refused = rows["16384"]
        assert refused["status"] == "did not start" and not refused["meets"]
        assert "max_num_batched_tokens (8192) must be greater than or equal" in (
            "".join(sum(refused["rank_lines"].values(), []))
        ), refused
        assert refused["rank_lines"], "the ranks' last lines are in the row"
        assert "does not fit" not in refused["reason"], "the ranks refused it, not the check"
        for raw in ("2", "8"):
            assert rows[raw]["status"] == "measured" and rows[raw]["meets"], rows[raw]
            assert rows[raw]["bench_id"] and rows[raw]["noise_pct"] is not None
        assert result["best"] in (2, 8) and result["done"]
        # Progress said on stderr; the sweep went on after the refused value.
        assert "sweep 1/3 done, value 16384: relaunch" in err
        assert "max_num_seqs=16384: did not start" in err
        # Without --apply-best the baseline's settings are left running.
        code = await asyncio.to_thread(cli.main, ["status", *inv, "--json"])
        (cluster,) = json.loads(capsys.readouterr().out)["clusters"]
        assert code == 0 and cluster["state"] == "ready"
        # Each value's runs are in the history like a tune step, and the sweep's record.
        assert cli.main(["history", "--json"]) == 0
        runs = json.loads(capsys.readouterr().out)
        kinds = [r["kind"] for r in runs]
        assert kinds.count("sweep") == 1 and kinds.count("bench") == 3  # baseline + 2 values
        assert kinds.count("launch") == 1 + 3 + 1  # first, each value, the baseline back
        sweep_id = next(r["id"] for r in runs if r["kind"] == "sweep")
        out_dir = tmp_path / "export"
        assert cli.main(["history", "export", sweep_id, "--out", str(out_dir)]) == 0
        report = (out_dir / "report.md").read_text()
        assert "sweep of max_num_seqs" in report and "did not start" in report
        code = await asyncio.to_thread(cli.main, ["stop", *inv])
        assert code == 0


async def _check_and_launch_refuse_alike(
    inv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """max_num_seqs above the recipe's own max_num_batched_tokens (4096): `check` and
    `launch` refuse it in vLLM's words, and the running cluster is left serving."""
    words = "max_num_batched_tokens (4096) must be greater than or equal to max_num_seqs (8192)"
    above = ["--set", "max_num_seqs=8192"]
    code = await asyncio.to_thread(cli.main, ["check", "glm-5.3-flash", *inv, *above, "--json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    said = [f for f in found if f["code"] == "batched_tokens_below_seqs"]
    assert code == 1 and said and words in said[0]["message"], found
    assert "--set max_num_batched_tokens=8192" in said[0]["remedy"], said
    code = await asyncio.to_thread(
        cli.main, ["launch", "glm-5.3-flash", *inv, *above, "--replace", "--wait"]
    )
    err = capsys.readouterr().err
    assert code != 0 and words in err and "--set max_num_batched_tokens=8192" in err, err
    code = await asyncio.to_thread(cli.main, ["status", *inv, "--json"])
    (cluster,) = json.loads(capsys.readouterr().out)["clusters"]
    assert code == 0 and cluster["state"] == "ready", cluster

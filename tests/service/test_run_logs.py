"""A stopped or failed cluster's rank logs survive in the history, with why it ended, and
the listing says where; records written before these fields existed still load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ops_helpers import FAKE_HF_TOKEN, glm_plan

from spark_tui import cli
from spark_tui.ops.cluster import CLUSTER_LABEL, RANK_LABEL, stop
from spark_tui.ops.history import History
from spark_tui.remote.docker_remote import LogRecord
from spark_tui.service.history import HistoryRow, RunHistory, keep_stopped_logs


class FakeDocker:
    """One node's Docker with our containers: the calls `ops.cluster.stop` makes."""

    def __init__(self, containers: dict[str, dict[str, Any]]) -> None:
        self.containers = containers  # name -> {labels, running, exit_code, log}

    async def containers_raw(self, labels: list[str]) -> list[dict[str, Any]]:
        return [
            {
                "Names": [f"/{name}"],
                "Labels": c["labels"],
                "State": "running" if c["running"] else "exited",
                "Status": "",
                "Command": "vllm serve m",
            }
            for name, c in self.containers.items()
        ]

    async def inspect(self, name: str) -> dict[str, Any] | None:
        c = self.containers.get(name)
        if c is None:
            return None
        return {"State": {"Running": c["running"], "ExitCode": c["exit_code"]}}

    async def stop(self, name: str, *, timeout: int = 10) -> dict[str, Any]:
        self.containers[name]["running"] = False
        return {"Running": False, "ExitCode": self.containers[name]["exit_code"]}

    async def logs(self, name: str, *, tail: int | str = "all") -> list[LogRecord]:
        return [LogRecord("", 0, line) for line in self.containers[name]["log"]]

    async def remove(self, name: str, *, stop_timeout: int = 10) -> bool:
        return self.containers.pop(name, None) is not None


def _container(cluster: str, rank: int, log: list[str], exit_code: int | None) -> dict[str, Any]:
    return {
        "labels": {CLUSTER_LABEL: cluster, RANK_LABEL: str(rank)},
        "running": exit_code is None,
        "exit_code": exit_code or 0,
        "log": log,
    }


async def test_a_stop_keeps_each_rank_log_and_a_dead_rank_fails_the_run() -> None:
    history = History()
    launch = history.record_launch(glm_plan(), {}, ok=True)
    cid = launch.cluster_id or ""
    dockers: dict[str, Any] = {
        "spark-a": FakeDocker(
            {"r0": _container(cid, 0, ["INFO serving", f"token {FAKE_HF_TOKEN}"], None)}
        ),
        "spark-b": FakeDocker({"r1": _container(cid, 1, ["ERROR NCCL timeout"], 1)}),
    }
    report = await stop(None, cid, dockers=dockers)  # type: ignore[arg-type]
    assert sorted(r for _, r in report.removed) == ["r0", "r1"]
    keep_stopped_logs(history, report)

    run = history.get_run(launch.id)
    assert [(k.rank, k.node) for k in run.rank_logs] == [(0, "spark-a"), (1, "spark-b")]
    head, worker = (Path(k.path) for k in run.rank_logs)
    assert head.read_text().splitlines() == ["INFO serving", "token ${HF_TOKEN}"]
    assert worker.read_text().strip() == "ERROR NCCL timeout"
    # Rank 1 had died before the stop: the launch that was "ok" is listed as failed.
    assert run.ok is False and run.failure == "exited with code 1 before the stop"
    row = HistoryRow.of(run)
    assert row.outcome == "FAILED" and row.logs == str(head.parent)
    assert f"logs: {head.parent}" in row.line() and run.failure in row.line()
    shown = RunHistory(history).show(run.id).text()
    assert f"rank 1 on spark-b: log kept in {worker}" in shown


def test_a_record_written_before_pydantic_still_loads(capsys: Any) -> None:
    history = History()
    history.root.mkdir(parents=True)
    # A launch and its benchmark exactly as the dataclass version wrote them.
    old = {
        "id": "20260101T000000-l000001",
        "time": "2026-01-01T00:00:00.000+00:00",
        "kind": "launch",
        "recipe": "glm-5.3-flash",
        "cluster_id": "st-1",
        "cluster_key": "10.0.0.1,10.0.0.2",
        "nodes": [{"name": "a", "address": "10.0.0.1", "rank": 0}],
        "model": "m",
        "model_revision": None,
        "overrides": {"max_num_seqs": 8},
        "settings": {"max_num_seqs": 8},
        "settings_hash": "abc",
        "image": "img",
        "image_digests": {"a": "sha256:1"},
        "network": {"a": {"HEAD_IP": "10.0.0.1"}},
        "commands": [{"rank": 0, "argv": ["vllm", "serve", "m"]}],
        "shell": None,
        "base_url": "http://10.0.0.1:8000/v1",
        "launch_id": None,
        "changed": [{"name": "max_num_seqs", "before": 4, "after": 8}],
        "ok": True,
        "results": {},
        "notes": [],
        "retired_field": "kept by older versions",
    }
    (history.root / f"{old['id']}.json").write_text(json.dumps(old, indent=2))
    (history.root / "baselines.json").write_text(json.dumps({"glm-5.3-flash|x": old["id"]}))
    run = history.get_run(old["id"])
    assert run.changed == old["changed"] and run.ok is True and run.rank_logs == []
    assert [r.id for r in history.list_runs()] == [old["id"]]
    assert history.reset_baseline("glm-5.3-flash") == [old["id"]]
    assert cli.main(["history"]) == 0
    first, *more = capsys.readouterr().out.strip().splitlines()
    assert first.startswith(old["id"]) and first.endswith(" ok") and len(first) <= 80
    assert "[max_num_seqs=8]" in " ".join(more) and all(len(line) <= 80 for line in more)

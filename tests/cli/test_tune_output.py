"""Headless `tune` says what the cockpit shows: the check that every rank carries the change
and the smoke checks after it, in text and in --json."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from spark_tui import cli
from spark_tui.ops.compare import Comparison
from spark_tui.ops.smoke import SmokeRequest, SmokeResult
from spark_tui.service import events as ev

CHANGE = [{"name": "max_num_seqs", "before": 4, "after": 8}]


class TunedSession:
    """A session whose tune went through: the events the service's tune emits."""

    async def tune(self, *args: Any, **kw: Any) -> AsyncIterator[Any]:
        yield ev.Notice("info", "every rank carries max_num_seqs=8: ranks [0, 1]")
        for name in ("health", "chat"):
            request = SmokeRequest("GET", "http://127.0.0.1:8000/health")
            yield ev.SmokeChecked(SmokeResult(name, True, 0.004, request, detail="200"))
        comparison = Comparison("b1", "b2", CHANGE)
        yield ev.Compared("b1", "b2", comparison, True, ranks_carrying=(0, 1))

    async def close(self) -> None:
        return None


@pytest.fixture
def tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("spark_tui.commands.terminal.session", lambda *a, **kw: TunedSession())


ARGS = ["tune", "glm-5.3-flash", "--hosts", "spark-a,spark-b", "--set", "max_num_seqs=8"]


def test_text_names_the_ranks_and_the_smoke_checks(
    tuned: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(ARGS) == 0
    out, err = capsys.readouterr()
    assert "every rank carries max_num_seqs=8 (ranks 0, 1)" in out
    assert "smoke after the change: 2/2 checks passed" in out
    assert "health" in out and "chat" in out and "max_num_seqs: 4 -> 8" in out
    assert "smoke: health" in err  # said as it came, too


def test_json_carries_them(tuned: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*ARGS, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ranks_carrying"] == [0, 1]
    assert [c["name"] for c in data["smoke"]] == ["health", "chat"]
    assert all(c["ok"] for c in data["smoke"]) and data["changed"] == CHANGE

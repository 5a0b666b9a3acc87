"""The classifier on real vLLM 0.32 output (CPU build, TP 2 over two lab nodes): the startup
phases, the weights bar and the ready line of the head, the phases of the headless worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tui.core.logclass import STARTUP_ORDER, StreamClassifier, explain_failure

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _labels(name: str) -> list[tuple[str, str]]:
    lines = (FIXTURES / name).read_text().splitlines()
    assert lines[0].startswith("# source: real vLLM 0.32.0")
    c = StreamClassifier()
    return [(r.kind, r.scope or "") for r in map(c.classify, lines[1:])]


def test_the_heads_startup_is_labelled_in_order() -> None:
    labels = _labels("vllm-0.32.0-cpu-tp2-head.log")
    phases = [scope for kind, scope in labels if kind == "phase"]
    for phase in (
        "engine_init",
        "distributed_init",
        "rank_assigned",
        "loading",
        "weights_loaded",
        "kv_cache",
        "engine_ready",
        "api_starting",
    ):
        assert phase in phases, phase
    firsts = [phases.index(p) for p in STARTUP_ORDER if p in phases]
    assert firsts == sorted(firsts), "the phases come in startup order"
    assert ("progress", "weights") in labels
    assert ("ready", "api") in labels
    assert not [lab for lab in labels if lab[0] == "error"]


@pytest.mark.parametrize(
    "line",
    [
        "(EngineCore pid=26) INFO 12-01 21:50:27 [kv_cache_utils.py:2327] CPU KV cache size: "
        "1,048,576 tokens, Maximum concurrency for 2,048 tokens per request: 512.00x",
        "(Worker_TP1 pid=21) INFO 12-01 21:50:27 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB "
        "for KV cache on node 0.",
    ],
)
def test_the_cpu_builds_kv_cache_lines_are_the_kv_cache_phase(line: str) -> None:
    r = StreamClassifier().classify(line)
    assert (r.kind, r.scope) == ("phase", "kv_cache")


def test_the_headless_workers_startup_is_labelled() -> None:
    phases = {s for k, s in _labels("vllm-0.32.0-cpu-tp2-worker.log") if k == "phase"}
    assert {"distributed_init", "rank_assigned", "loading", "weights_loaded", "kv_cache"} <= phases


def test_no_line_of_a_healthy_startup_is_taken_for_a_failure() -> None:
    for name in ("vllm-0.32.0-cpu-tp2-head.log", "vllm-0.32.0-cpu-tp2-worker.log"):
        assert explain_failure((FIXTURES / name).read_text().splitlines()[1:]) == []

"""The stand-in's /metrics held against real vLLM 0.32's as the lab's real install served it:
tests/fixtures/vllm-0.32.0-cpu-metrics-{before,after}.prom, before and after the requests of
tests/lab/standin_compare.py (how they were captured is in their header).

The stand-in gets the same requests and must serve the same families (names, types, label
names, histogram buckets) and move the same ones; the relations test_engine_metrics.py holds
the stand-in to are checked on real vLLM's page here. tests/lab/test_lab_vllm_parity.py repeats
the comparison against the lab's running real vLLM.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from engine_harness import Engine, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
import standin_compare as sc  # noqa: E402  (the lab comparison's requests and parsing)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = {
    "before": FIXTURES / "vllm-0.32.0-cpu-metrics-before.prom",
    "after": FIXTURES / "vllm-0.32.0-cpu-metrics-after.prom",
}
SERVED = sc.SERVED
SERVE_FLAGS = sc.SERVE_FLAGS


@pytest.fixture(scope="module")
def pages() -> Iterator[dict[str, str]]:
    """The stand-in's /metrics before and after the same requests real vLLM got."""
    port = free_port()
    argv = ["serve", "Qwen/Qwen3-0.6B", "--host", "127.0.0.1", "--port", str(port)]
    # Real vLLM's KV block size (the CPU build picks its own; it decides which repeated
    # prompts hit the prefix cache).
    engine = Engine([*argv, *SERVE_FLAGS, "--block-size", sc.cache_block_size(real_page("before"))])
    try:
        engine.wait_healthy(port, timeout=60)
        base = f"http://127.0.0.1:{port}"
        before = httpx.get(base + "/metrics", timeout=30).text
        sc.send(base, SERVED)
        yield {"before": before, "after": httpx.get(base + "/metrics", timeout=30).text}
    finally:
        engine.stop()


def real_page(when: str) -> str:
    return REAL[when].read_text()


def test_the_fixtures_are_real_vllm_032s_pages() -> None:
    for when in REAL:
        assert real_page(when).startswith("# captured from real vLLM 0.32.0"), when
        real = sc.families(real_page(when))
        assert len(real) == 74, sorted(real)  # 72 of the engine, 2 of the tool parser
        assert real["vllm:time_to_first_token_seconds"].kind == "histogram"


def test_the_stand_in_serves_every_family_of_real_vllm(pages: dict[str, str]) -> None:
    for when in REAL:
        real = sc.families(real_page(when))
        problems = sc.family_problems(real, sc.families(pages[when]))
        assert not problems, f"{when} the requests:\n" + "\n".join(problems)


def test_the_same_requests_move_the_same_families(pages: dict[str, str]) -> None:
    real = sc.moved(sc.families(real_page("before")), sc.families(real_page("after")))
    assert "vllm:tool_call_parser_invocations_total" in real  # (the forced tool call)
    sim = sc.moved(sc.families(pages["before"]), sc.families(pages["after"]))
    assert real - sim == set(), "moved on real vLLM only"
    assert sim - real == set(), "moved on the stand-in only"


def test_real_vllms_page_keeps_the_relations_the_stand_in_is_held_to() -> None:
    for when in REAL:
        for name, (a, b) in sc.relations(real_page(when)).items():
            assert a == b, f"{when}: {name}: {a} vs {b}"

"""A MoE model's data-parallel replicas on vLLM's CPU build: they reach ready, then the first
request stops every engine in all_gatherv with a bare NotImplementedError. What the failure
shows and the remedy it gets, held against the real logs of that launch on the lab."""

from __future__ import annotations

from pathlib import Path

from spark_tui.core.facts import GIB, Interface, NodeFacts
from spark_tui.core.launch_rules import rank_failure_remedy
from spark_tui.core.logclass import explain_failure
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import Recipe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RAISED_IN = 'base_device_communicator.py", line 296, in all_gatherv'


def _real(rank: str) -> list[str]:
    lines = (FIXTURES / f"vllm-0.32.0-cpu-moe-dp2-{rank}.log").read_text().splitlines()
    assert lines[0].startswith("# source: real vLLM 0.32.0")
    return lines[1:]


def _nodes(n: int) -> list[NodeFacts]:
    return [
        NodeFacts(
            name=f"spark-{i}",
            address=f"10.0.0.{i + 1}",
            memory_total_bytes=128 * GIB,
            interfaces=[
                Interface("enp1s0f0np0", "rocep1s0f0", "up", f"192.168.50.{i + 1}", 200000)
            ],
        )
        for i in range(n)
    ]


RECIPE = Recipe(name="moe", model="org/moe", container="img:1", command="vllm serve {model}")


def test_each_ranks_explanation_says_where_the_bare_exception_was_raised() -> None:
    for rank in ("head", "worker"):
        shown = explain_failure(_real(rank))
        assert len(shown) <= 6, shown
        assert any(line.endswith(RAISED_IN) for line in shown), shown
        raised = next(i for i, line in enumerate(shown) if line.endswith(RAISED_IN))
        assert shown[raised + 1].endswith("NotImplementedError"), shown
        # vLLM's dump of the engine's state is evidence for a bug report, not a cause.
        assert not [line for line in shown if "Dumping" in line], shown
        assert any("RuntimeError: Worker failed" in line for line in shown), shown


def test_an_exception_with_a_message_keeps_its_frames_out() -> None:
    lines = [
        "(EngineCore pid=7) ERROR 12-05 11:31:52 [core.py:1] Traceback (most recent call last):",
        '(EngineCore pid=7) ERROR 12-05 11:31:52 [core.py:1]   File "/x/y.py", line 3, in f',
        "(EngineCore pid=7) ERROR 12-05 11:31:52 [core.py:1]     raise ValueError('no')",
        "(EngineCore pid=7) ERROR 12-05 11:31:52 [core.py:1] ValueError: the model is too big",
    ]
    assert explain_failure(lines) == [
        "(EngineCore pid=7) ERROR 12-05 11:31:52 [core.py:1] ValueError: the model is too big"
    ]
    bare = [*lines[:3], "(EngineCore pid=7) ERROR 12-05 11:31:52 [core.py:1] ValueError"]
    assert explain_failure(bare) == [lines[1].strip(), bare[-1]]


def test_the_remedy_is_one_replica_over_the_same_nodes() -> None:
    said = explain_failure(_real("worker")) + explain_failure(_real("head"))
    dp2 = build_plan(RECIPE, {"tensor_parallel": 1, "data_parallel": 2}, _nodes(2))
    remedy = rank_failure_remedy(said, dp2.ranks)
    assert remedy is not None
    assert "all_gatherv" in remedy and "MoE" in remedy
    assert "--set data_parallel=1 --set tensor_parallel=2" in remedy, remedy
    hybrid = build_plan(RECIPE, {"tensor_parallel": 2, "data_parallel": 2}, _nodes(4))
    remedy = rank_failure_remedy(said, hybrid.ranks)
    assert remedy is not None and "--set tensor_parallel=4" in remedy, remedy


def test_the_same_lines_without_data_parallelism_get_no_such_remedy() -> None:
    said = explain_failure(_real("worker"))
    tp2 = build_plan(RECIPE, {"tensor_parallel": 2}, _nodes(2))
    assert rank_failure_remedy(said, tp2.ranks) is None
    dp2 = build_plan(RECIPE, {"tensor_parallel": 1, "data_parallel": 2}, _nodes(2))
    other = [line for line in said if RAISED_IN not in line]
    assert rank_failure_remedy(other, dp2.ranks) is None

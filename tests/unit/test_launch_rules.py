"""One launch rule for every interface, and remedies that name what to check."""

from __future__ import annotations

from spark_tui.core.facts import GIB, Interface, NodeFacts
from spark_tui.core.fit import Finding, FitReport
from spark_tui.core.launch_rules import launch_blocked, rank_failure_remedy, rendezvous_timeout
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import Recipe

TIMEOUT_LINE = (
    "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms "
    "while trying to connect to (192.168.50.1, 29501)."
)


def _report(verdict: str, findings: list[Finding] | None = None, missing=()) -> FitReport:  # type: ignore[no-untyped-def]
    return FitReport(verdict=verdict, findings=findings or [], missing=list(missing))


def test_unknown_fit_blocks_unless_forced() -> None:
    report = _report("unknown", missing=["model facts: head_dim"])
    blocked = launch_blocked(report, force=False, recipe="r")
    assert blocked is not None
    assert "unknown" in blocked.message and "head_dim" in blocked.message
    assert "--force" in blocked.remedy
    assert launch_blocked(report, force=True) is None


def test_does_not_fit_blocks_with_the_first_error_and_fits_go_ahead() -> None:
    error = Finding("error", "free_memory", "not enough free memory", "stop other containers")
    blocked = launch_blocked(_report("does_not_fit", [error]), force=False, recipe="r")
    assert blocked is not None and "not enough free memory" in blocked.message
    assert blocked.remedy.startswith("stop other containers") and "--force" in blocked.remedy
    assert launch_blocked(_report("does_not_fit", [error]), force=True) is None
    assert launch_blocked(_report("fits"), force=False) is None
    assert launch_blocked(_report("fits_with_warnings"), force=False) is None


def _node(i: int) -> NodeFacts:
    return NodeFacts(
        name=f"spark-{i}",
        address=f"10.0.0.{i + 1}",
        memory_total_bytes=128 * GIB,
        interfaces=[Interface("enp1s0f0np0", "rocep1s0f0", "up", f"192.168.50.{i + 1}", 200000)],
    )


def test_rendezvous_timeout_remedy_names_port_addresses_and_firewall() -> None:
    recipe = Recipe(
        name="r", model="org/m", container="img:1",
        command="vllm serve {model} --tensor-parallel-size 2",
    )  # fmt: skip
    plan = build_plan(recipe, {}, [_node(0), _node(1)])
    assert rendezvous_timeout([TIMEOUT_LINE])
    remedy = rank_failure_remedy(["INFO loading", TIMEOUT_LINE], plan.ranks)
    assert remedy is not None
    assert "192.168.50.1:29501" in remedy and "spark-1 (192.168.50.2)" in remedy
    assert "firewall" in remedy and "29501/tcp" in remedy
    assert rank_failure_remedy(["CUDA out of memory"], plan.ranks) is None

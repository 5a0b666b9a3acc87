"""Per-rank environment in the launch plan: each rank's own VLLM_HOST_IP on multi-node
launches (real vLLM's multi-node message queue advertises it), and `{rank}` in a recipe's
env value (the lab binds each rank's CPU threads to its own core)."""

from __future__ import annotations

from test_plan import HEAD_IP, WORKER_IP, head_node, worker_node  # type: ignore[import-not-found]

from spark_tui.core.overrides import apply_overrides
from spark_tui.core.plan import build_plan
from spark_tui.core.recipe import Recipe


def _recipe(env: dict[str, str] | None = None) -> Recipe:
    return Recipe(
        name="t",
        model="org/model",
        command="vllm serve {model} --port {port} --tensor-parallel-size {tensor_parallel}",
        container="example/vllm:1",
        defaults={"port": 8000, "tensor_parallel": 2},
        env=env or {},
    )


def test_every_rank_of_a_multi_node_launch_advertises_its_own_address() -> None:
    recipe = _recipe()
    plan = build_plan(recipe, apply_overrides(recipe, []), [head_node(), worker_node()])
    head, worker = plan.ranks
    assert head.container.env["VLLM_HOST_IP"] == HEAD_IP
    assert worker.container.env["VLLM_HOST_IP"] == WORKER_IP


def test_a_single_node_launch_sets_no_host_ip() -> None:
    recipe = _recipe()
    recipe.defaults["tensor_parallel"] = 1
    plan = build_plan(recipe, apply_overrides(recipe, []), [head_node()])
    assert "VLLM_HOST_IP" not in plan.ranks[0].container.env


def test_rank_placeholder_in_env_is_each_ranks_number() -> None:
    recipe = _recipe({"VLLM_CPU_OMP_THREADS_BIND": "{rank}", "OTHER": "core-{rank}-x"})
    plan = build_plan(recipe, apply_overrides(recipe, []), [head_node(), worker_node()])
    envs = [r.container.env for r in plan.ranks]
    assert [e["VLLM_CPU_OMP_THREADS_BIND"] for e in envs] == ["0", "1"]
    assert [e["OTHER"] for e in envs] == ["core-0-x", "core-1-x"]
    assert "VLLM_CPU_OMP_THREADS_BIND=1" in plan.to_shell()

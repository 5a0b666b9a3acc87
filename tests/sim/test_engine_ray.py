"""The stand-in's Ray executor without Ray: it refuses as vLLM does (the lab image has Ray;
tests/lab/test_lab_ray.py runs the path against a real Ray cluster)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spark_tui.sim.engine import ray_path


def test_the_ray_backend_is_chosen_only_by_its_flag() -> None:
    class Args:
        distributed_executor_backend = "ray"

    assert ray_path.wanted(Args())
    Args.distributed_executor_backend = "mp"
    assert not ray_path.wanted(Args())


def test_without_ray_the_engine_says_to_install_it_and_exits_1(tmp_path: Path) -> None:
    # Ray made unimportable as where it is not installed, even on a machine that has it.
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ray'\", name='ray')\n"
    )
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "SPARK_SIM_PACE": "0.01", "PYTHONPATH": path}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_tui.sim.engine",
            "serve",
            "nvidia/GLM-5.3-Flash-FP4-Local",
            "-tp",
            "2",
            "--distributed-executor-backend",
            "ray",
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    out = proc.stdout + proc.stderr
    assert "ValueError: Failed to import Ray: No module named 'ray'" in out
    # Not the "World size is larger than the GPUs of this node" refusal: Ray places ranks.
    assert "World size (2) is larger" not in out


def test_losing_a_ray_worker_prints_vllms_lines() -> None:
    lines = ray_path.lost_lines(1)
    assert (
        "engine",
        "ray_executor_v2.py:464",
        "RayWorkerProc rank=[1] died unexpectedly, shutting down executor.",
    ) in lines
    assert any("EngineDeadError" in m for _c, _s, m in lines)

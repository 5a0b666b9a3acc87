"""The simulated engine's Ray executor (`--distributed-executor-backend ray`).

As vLLM's Ray executor does, the engine joins the Ray cluster it runs in (`ray.init` with
the local node's address), needs one Ray node per rank (TP x PP), places one worker actor
on each node and then watches them: a worker whose node is lost ends the engine with the
lines real vLLM prints (compare vllm_fail_ray_worker_died_spark_ring.txt). The Ray cluster
is real (Ray from PyPI in the lab image); only the model work is simulated.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from spark_tui.sim.engine.failures import CLI_FRAMES, Failure


def wanted(args: Any) -> bool:
    return str(getattr(args, "distributed_executor_backend", None) or "") == "ray"


def _no_ray(exc: BaseException) -> Failure:
    return Failure(
        f"ValueError: Failed to import Ray: {exc}. Please install Ray with `pip install ray`.",
        CLI_FRAMES,
        "config",
    )


def _too_few_nodes(world: int, nodes: int) -> Failure:
    return Failure(
        f"ValueError: Cannot provide a placement group of {world} bundle(s) (one GPU per rank): "
        f"the Ray cluster has {nodes} node(s) alive. Make sure the Ray cluster has enough "
        "nodes (`ray status`).",
        CLI_FRAMES,
        "engine",
    )


class RayWorkers:
    """One actor per rank, each on its own Ray node; `watch` calls `lost(rank)` on a loss."""

    def __init__(self, world: int) -> None:
        self.world = world
        self.ray: Any = None
        self.actors: list[Any] = []
        self.placed: list[tuple[int, str]] = []  # (pid, node ip) per rank
        self._stop = threading.Event()

    def connect(self) -> str:
        """Join the local Ray cluster; returns its GCS address."""
        try:
            import ray
        except ImportError as exc:
            raise _no_ray(exc) from exc
        self.ray = ray
        ip = os.environ.get("VLLM_HOST_IP") or None
        ctx = ray.init(
            address="auto",
            _node_ip_address=ip,
            logging_level="ERROR",
            log_to_driver=False,
            include_dashboard=False,
        )
        return str(getattr(ctx, "address_info", {}).get("gcs_address", "auto"))

    def place(self) -> None:
        """A worker actor on each of `world` alive nodes, head's node first."""
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        nodes.sort(key=lambda n: n["NodeID"] != here)
        if len(nodes) < self.world:
            raise _too_few_nodes(self.world, len(nodes))

        @ray.remote(num_cpus=0, max_restarts=0)
        class RayWorkerWrapper:
            def hello(self) -> tuple[int, str]:
                return os.getpid(), ray.util.get_node_ip_address()

            def ping(self) -> bool:
                return True

        for node in nodes[: self.world]:
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            self.actors.append(RayWorkerWrapper.options(scheduling_strategy=strategy).remote())
        self.placed = ray.get([a.hello.remote() for a in self.actors], timeout=120)

    def watch(self, lost: Any, interval: float = 0.5) -> None:
        """Ping every worker in a thread; the first that fails is reported once."""

        def loop() -> None:
            while not self._stop.is_set():
                for rank, actor in enumerate(self.actors):
                    try:
                        self.ray.get(actor.ping.remote(), timeout=15)
                    except Exception:  # RayActorError, ActorDiedError, GetTimeoutError
                        if not self._stop.is_set():
                            lost(rank)
                        return
                time.sleep(interval)

        threading.Thread(target=loop, daemon=True, name="ray-workers").start()

    def stop(self) -> None:
        self._stop.set()


def lost_lines(rank: int) -> list[tuple[str, str, str]]:
    """(channel, source, message) of vLLM's lines when a Ray worker dies."""
    return [
        (
            "raylet",
            "",
            "A worker died or was killed while executing a task by an unexpected system error.",
        ),
        (
            "engine",
            "ray_executor_v2.py:464",
            f"RayWorkerProc rank=[{rank}] died unexpectedly, shutting down executor.",
        ),
        ("engine", "core.py:1512", "EngineCore encountered a fatal error."),
        ("api", "", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."),
    ]


__all__ = ["RayWorkers", "lost_lines", "wanted"]

"""Environment knobs of the simulated engine (names fixed: the simulated nodes and the lab set them).

| variable | default | meaning |
|---|---|---|
| SPARK_SIM_MEM_TOTAL_BYTES | 128452014080 | node memory (MemTotal of a GB10, free_b_gb10.txt) |
| SPARK_SIM_MEM_AVAILABLE_BYTES | total x 0.9642 | MemAvailable (123858804736 of 128452014080 in free_b_gb10.txt) |
| SPARK_SIM_PAGE_CACHE_BYTES | 0 | page cache held; on GB10's unified memory it is not free to CUDA |
| SPARK_SIM_PACE | 1.0 | startup pace multiplier: 1.0 = demo (ready in 10-30 s), 0.05 = tests (~1 s) |
| SPARK_SIM_TOKEN_SCALE | 1.0 | multiplier on every token timing (1.0 = GB10 speed) |
| SPARK_SIM_BIND_ADDRESS | unset | bind the API and rendezvous here instead of --host / 0.0.0.0 |
| SPARK_SIM_DIE_AFTER_READY_S | unset | scenario: this rank exits N s after it is ready (a node that dies) |
| SPARK_SIM_DIE_WHEN_PATH | unset | scenario: this rank, once ready, exits as soon as this file exists (a death a test sets off when it wants) |
| SPARK_SIM_ENGINE_DEAD_HEALTH_OK | unset | scenario: `/health` says 200 but every request fails with 500 "EngineCore encountered an issue" (real vLLM after its engine core died) |
| SPARK_SIM_RENDEZVOUS_TIMEOUT_S | max(60 x pace, 5) | how long ranks wait for each other (unset: the head waits forever, as real vLLM's does) |
| SPARK_SIM_HEARTBEAT_TIMEOUT_S | 5 | silence after which a peer counts as lost (EOF is detected at once) |
| SPARK_SIM_STATS_INTERVAL_S | 10 | period of the "Engine 000: Avg prompt throughput" log line |
| SPARK_SIM_GPUS_PER_NODE | 1 | GPUs per node (a DGX Spark has one GB10) |
| SPARK_SIM_OWNER_PID | unset | the simulated node's process: the rank stops (as on `docker stop`) once it is gone |
| SPARK_SIM_LINK_FILE | unset | where a multi-rank head writes the bytes its ranks would have sent over the link (`link_traffic`) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

GB10_MEM_TOTAL_BYTES = 128452014080  # free_b_gb10.txt, "Mem:" total
GB10_MEM_AVAILABLE_BYTES = 123858804736  # free_b_gb10.txt, "available"
AVAILABLE_FRACTION = GB10_MEM_AVAILABLE_BYTES / GB10_MEM_TOTAL_BYTES


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        return default


def _opt_float(env: Mapping[str, str], name: str) -> float | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def _opt_pid(env: Mapping[str, str], name: str) -> int | None:
    value = _opt_float(env, name)
    return int(value) if value is not None and value > 1 else None


@dataclass(frozen=True)
class SimSettings:
    """The simulated node's knobs, read once from the environment."""

    mem_total: int
    mem_available: int
    page_cache: int
    pace: float
    token_scale: float
    bind_address: str | None
    die_after_ready_s: float | None
    engine_dead_health_ok: bool
    rendezvous_timeout_s: float
    heartbeat_timeout_s: float
    stats_interval_s: float
    gpus_per_node: int
    # Where the head writes its simulated link traffic (see `link_traffic`); None: nowhere.
    link_file: str | None = None
    # The simulated node's process: a rank outlives it only as an orphan nobody can stop
    # (it runs in a session of its own), so it ends when that process is gone.
    owner_pid: int | None = None
    # Real vLLM's head waits for its workers forever; a timeout applies to it only when
    # SPARK_SIM_RENDEZVOUS_TIMEOUT_S is set (workers always give up, as torch's clients do).
    head_waits_forever: bool = False
    # A ready rank exits (as with die_after_ready_s) once this file exists.
    die_when_path: str | None = None
    # Seconds between "Application startup complete." and the API answering: uvicorn logs
    # that line before its socket listens (real time, not paced).
    listen_after_s: float = 0.01

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SimSettings:
        """Read every knob from `env` (default: os.environ)."""
        env = os.environ if env is None else env
        total = int(_float(env, "SPARK_SIM_MEM_TOTAL_BYTES", GB10_MEM_TOTAL_BYTES))
        available = int(_float(env, "SPARK_SIM_MEM_AVAILABLE_BYTES", total * AVAILABLE_FRACTION))
        page_cache = int(_float(env, "SPARK_SIM_PAGE_CACHE_BYTES", 0))
        pace = max(0.0, _float(env, "SPARK_SIM_PACE", 1.0))
        timeout = _opt_float(env, "SPARK_SIM_RENDEZVOUS_TIMEOUT_S")
        return cls(
            mem_total=total,
            mem_available=min(available, total),
            page_cache=max(0, page_cache),
            pace=pace,
            token_scale=max(0.0, _float(env, "SPARK_SIM_TOKEN_SCALE", 1.0)),
            bind_address=(env.get("SPARK_SIM_BIND_ADDRESS") or "").strip() or None,
            die_after_ready_s=_opt_float(env, "SPARK_SIM_DIE_AFTER_READY_S"),
            die_when_path=(env.get("SPARK_SIM_DIE_WHEN_PATH") or "").strip() or None,
            engine_dead_health_ok=env.get("SPARK_SIM_ENGINE_DEAD_HEALTH_OK", "").strip()
            in ("1", "true", "yes"),
            rendezvous_timeout_s=timeout if timeout is not None else max(60.0 * pace, 5.0),
            heartbeat_timeout_s=_float(env, "SPARK_SIM_HEARTBEAT_TIMEOUT_S", 5.0),
            head_waits_forever=timeout is None,
            stats_interval_s=max(0.05, _float(env, "SPARK_SIM_STATS_INTERVAL_S", 10.0)),
            gpus_per_node=max(1, int(_float(env, "SPARK_SIM_GPUS_PER_NODE", 1))),
            link_file=(env.get("SPARK_SIM_LINK_FILE") or "").strip() or None,
            owner_pid=_opt_pid(env, "SPARK_SIM_OWNER_PID"),
            listen_after_s=max(0.0, _float(env, "SPARK_SIM_LISTEN_AFTER_S", 0.01)),
        )

    @property
    def free_for_cuda(self) -> int:
        """Memory CUDA can allocate at startup: available minus the page cache (GB10 is UMA)."""
        return max(0, self.mem_available - self.page_cache)

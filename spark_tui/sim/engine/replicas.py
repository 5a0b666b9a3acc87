"""SIMULATED data-parallel engines behind one API server: the head's API balances requests
over every replica's engine (vLLM's internal load balancing), each engine with its own
scheduler and counters, labelled `engine="N"` in /metrics as real vLLM labels them."""

from __future__ import annotations

import threading
import weakref
from typing import Protocol

from spark_tui.sim.engine.metrics import EngineMetrics
from spark_tui.sim.engine.scheduler import Request, Scheduler


class RequestQueue(Protocol):
    """Where the API server puts requests: one engine, or several behind a balancer."""

    def submit(self, req: Request) -> None: ...

    def abort(self, req: Request) -> None: ...


class MetricsText(Protocol):
    """What /metrics renders."""

    def render(self) -> str: ...


class Balancer:
    """Every request to the engine with the fewest running and waiting requests; among
    equals, the next after the last chosen (vLLM's DP client starts its search at a
    moving index and counts a request on its engine at once, so idle engines take turns)."""

    def __init__(self, engines: list[Scheduler]) -> None:
        self.engines = engines
        self._lock = threading.Lock()
        self._next = 0
        # Which engine holds a request (for its abort); forgotten with the request.
        self._owner: weakref.WeakKeyDictionary[Request, Scheduler] = weakref.WeakKeyDictionary()

    def submit(self, req: Request) -> None:
        with self._lock:
            n = len(self.engines)
            order = [(self._next + k) % n for k in range(n)]
            loads = []
            for i in order:
                snap = self.engines[i].snapshot()
                loads.append(snap["running"] + snap["waiting"])
            chosen = order[loads.index(min(loads))]
            self._next = (chosen + 1) % n
            engine = self.engines[chosen]
            self._owner[req] = engine
        engine.submit(req)

    def abort(self, req: Request) -> None:
        with self._lock:
            engine = self._owner.get(req)
        if engine is not None:
            engine.abort(req)


class MergedMetrics:
    """The engines' exposition texts as one: each family once, its HELP and TYPE lines
    first, then every engine's samples of it (the text format wants a family together)."""

    def __init__(self, metrics: list[EngineMetrics]) -> None:
        self.metrics = metrics

    def render(self) -> str:
        heads: dict[str, list[str]] = {}
        samples: dict[str, list[str]] = {}
        for m in self.metrics:
            family = ""
            for line in m.render().splitlines():
                if line.startswith(("# HELP ", "# TYPE ")):
                    family = line.split()[2]
                    if family not in samples:
                        heads.setdefault(family, []).append(line)
                    continue
                samples.setdefault(family, []).append(line)
        out: list[str] = []
        for family in dict.fromkeys([*heads, *samples]):
            out += heads.get(family, []) + samples.get(family, [])
        return "\n".join(out) + "\n"

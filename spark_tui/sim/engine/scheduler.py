"""SIMULATED continuous-batching scheduler: one background thread steps every running request
together, at the times `timing` gives, and really delivers tokens at those times.

Per step: up to `max_num_seqs` requests run; decoding requests take 1 (+ drafted) tokens of the
`max_num_batched_tokens` budget, prompts in prefill take chunks of the rest. A prompt's last
chunk yields its first token (time to first token). Requests beyond `max_num_seqs` or beyond
the KV cache wait; a running request is preempted (recomputed later) when the cache is full.
With prefix caching, full blocks of a prompt already seen are not prefilled again.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Any

from spark_tui.sim.engine.generate import Piece
from spark_tui.sim.engine.metrics import EngineMetrics
from spark_tui.sim.engine.timing import TimingModel


class Request:
    """One request in the engine: its prompt, its planned output, and its progress."""

    def __init__(
        self,
        request_id: str,
        prompt_ids: list[int],
        pieces: list[Piece],
        finish_reason: str,
        stop_reason: str | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.request_id = request_id
        self.prompt_ids = prompt_ids
        self.prompt_len = len(prompt_ids)
        self.pieces = pieces
        self.finish_reason = finish_reason
        self.stop_reason = stop_reason
        self.events: queue.Queue[tuple[str, Any]] = (
            queue.Queue()
        )  # ("tokens", [Piece]) / ("done", ..)
        self.arrival = time.monotonic()
        # The same moments on the engine's own clock (see Scheduler.clock).
        self.arrival_clock = 0.0
        self.first_token_clock: float | None = None
        self.scheduled_at: float | None = None
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None
        self.computed = 0  # tokens of (prompt + generated) whose KV is in the cache
        self.generated = 0
        self.cached_tokens = 0
        self.spec_credit = 0.0
        self.aborted = False
        self.max_tokens = max_tokens  # the request's max_tokens (vLLM's histogram of it)
        self.preemptions = 0

    @property
    def context(self) -> int:
        """Tokens this request holds in the KV cache once its prefill is done."""
        return self.prompt_len + self.generated

    @property
    def prefilling(self) -> bool:
        """Whether prompt (or recompute) tokens are still to be processed."""
        return self.computed < self.context


class Scheduler(threading.Thread):
    """The engine loop (a daemon thread)."""

    def __init__(
        self,
        timing: TimingModel,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        kv_capacity_tokens: int,
        block: int,
        prefix_caching: bool,
        metrics: EngineMetrics,
    ) -> None:
        super().__init__(name="sim-engine-scheduler", daemon=True)
        self.timing = timing
        self.max_num_seqs = max(1, max_num_seqs)
        self.budget = max(1, max_num_batched_tokens)
        self.capacity = max(block, kv_capacity_tokens)
        self.block = max(1, block)
        self.prefix_caching = prefix_caching
        self.metrics = metrics
        self.cond = threading.Condition()
        self.waiting: collections.deque[Request] = collections.deque()
        self.running: list[Request] = []
        self.stopped = False
        self.cache: collections.OrderedDict[int, None] = collections.OrderedDict()
        self.interval_prompt = 0
        self.interval_generation = 0
        self.interval_drafted = 0
        self.interval_accepted = 0
        # Engine seconds: the sum of the modelled step times so far. Unlike the wall clock
        # it does not stretch when the machine is loaded, so what depends on the model of
        # the engine (throughput, time to first token) can be read from it exactly.
        self.clock = 0.0
        self.peak_running = 0
        self.peak_waiting = 0

    # --- API side -------------------------------------------------------------------------
    def submit(self, req: Request) -> None:
        """Queue a request; its tokens arrive on `req.events`."""
        with self.cond:
            req.arrival_clock = self.clock
            self.waiting.append(req)
            self._update_gauges()
            self.cond.notify()

    def abort(self, req: Request) -> None:
        """Drop a request whose client went away."""
        with self.cond:
            req.aborted = True
            self.cond.notify()

    def stop(self) -> None:
        """End the loop."""
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def take_interval(self) -> tuple[int, int, int, int]:
        """Prompt and generation tokens (and spec drafted/accepted) since the last call."""
        with self.cond:
            out = (
                self.interval_prompt,
                self.interval_generation,
                self.interval_drafted,
                self.interval_accepted,
            )
            self.interval_prompt = self.interval_generation = 0
            self.interval_drafted = self.interval_accepted = 0
            return out

    def snapshot(self) -> dict[str, float]:
        """Running, waiting and KV usage now."""
        with self.cond:
            return {
                "running": len(self.running),
                "waiting": len(self.waiting),
                "kv_usage": self._used() / self.capacity,
            }

    # --- engine side ----------------------------------------------------------------------
    def _used(self) -> int:
        return sum(min(r.computed, r.context) for r in self.running)

    def _update_gauges(self) -> None:
        self.peak_running = max(self.peak_running, len(self.running))
        self.peak_waiting = max(self.peak_waiting, len(self.waiting))
        with self.metrics.lock:
            self.metrics.running = len(self.running)
            self.metrics.waiting = len(self.waiting)
            self.metrics.kv_usage = min(1.0, self._used() / self.capacity)

    def _block_hashes(self, ids: list[int]) -> list[int]:
        out: list[int] = []
        prev = 0
        for start in range(0, len(ids) - self.block + 1, self.block):
            prev = hash((prev, tuple(ids[start : start + self.block])))
            out.append(prev)
        return out

    def _admit(self) -> None:
        for req in list(self.waiting):
            if req.aborted:
                self.waiting.remove(req)
                self._finish_metrics(req, "abort")
        while self.waiting and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            need = req.context - req.computed
            if self.running and self._used() + need + self.block > self.capacity:
                break
            self.waiting.popleft()
            if req.scheduled_at is None:
                req.scheduled_at = time.monotonic()
            if self.prefix_caching and req.computed == 0 and req.generated == 0:
                hit = 0
                for h in self._block_hashes(req.prompt_ids):
                    if h not in self.cache:
                        break
                    self.cache.move_to_end(h)
                    hit += self.block
                hit = min(hit, max(0, req.prompt_len - 1))
                req.cached_tokens = hit
                req.computed = hit
                with self.metrics.lock:
                    self.metrics.prefix_queries += req.prompt_len
                    self.metrics.prefix_hits += hit
            self.running.append(req)

    def _remember_prefix(self, req: Request) -> None:
        if not self.prefix_caching:
            return
        for h in self._block_hashes(req.prompt_ids):
            self.cache[h] = None
            self.cache.move_to_end(h)
        limit = max(1, self.capacity // self.block)
        while len(self.cache) > limit:
            self.cache.popitem(last=False)

    def _finish_metrics(self, req: Request, reason: str) -> None:
        key = "stop" if reason == "tool_calls" else reason
        with self.metrics.lock:
            if req.first_token_at is None or req.scheduled_at is None:
                # Aborted before its first token: counted, no phases to observe.
                self.metrics.success[key if key in self.metrics.success else "stop"] += 1
                return
            last = req.last_token_at if req.last_token_at is not None else req.first_token_at
            times = {
                "e2e": time.monotonic() - req.arrival,
                "queue": req.scheduled_at - req.arrival,
                "prefill": req.first_token_at - req.scheduled_at,
                "decode": last - req.first_token_at,
                "inference": last - req.scheduled_at,
            }
            self.metrics.finished(
                key,
                times,
                req.prompt_len,
                req.generated,
                req.cached_tokens,
                req.preemptions,
                req.max_tokens,
            )

    def run(self) -> None:
        """Step the running requests until stopped."""
        deadline = time.monotonic()
        while True:
            with self.cond:
                while not self.stopped and not self.waiting and not self.running:
                    self.cond.wait(0.5)
                if self.stopped:
                    return
                self.running = [r for r in self.running if not self._drop_aborted(r)]
                self._admit()
                self._update_gauges()
                if not self.running:
                    self.cond.wait(0.05)
                    continue
                budget = self.budget
                decoding = [r for r in self.running if not r.prefilling]
                drafted = self.timing.num_speculative_tokens
                budget -= len(decoding) * (1 + drafted)
                chunks: list[tuple[Request, int]] = []
                for req in self.running:
                    if req.prefilling and budget > 0:
                        chunk = min(req.context - req.computed, budget)
                        budget -= chunk
                        chunks.append((req, chunk))
                kv_tokens = sum(r.context for r in decoding)
                prefill_tokens = sum(c for _r, c in chunks)
                step = self.timing.step_time(len(decoding), kv_tokens, prefill_tokens)
            now = time.monotonic()
            if deadline < now - step:
                deadline = now  # idle or far behind: start afresh rather than burst
            deadline += step
            delay = deadline - now
            if delay > 0:
                time.sleep(delay)
            with self.cond:
                self.clock += step
                self._apply(decoding, chunks, drafted)
                self._update_gauges()

    def _drop_aborted(self, req: Request) -> bool:
        if req.aborted:
            self._finish_metrics(req, "abort")
            return True
        return False

    def _emit(self, req: Request, count: int, now: float) -> int:
        start = req.generated
        end = min(len(req.pieces), start + count)
        if end > start:
            # One event per step, as the engine hands a step's tokens to the API server at once.
            req.events.put(("tokens", req.pieces[start:end]))
        emitted = end - start
        req.generated = end
        req.computed = min(req.computed + emitted, req.context)
        with self.metrics.lock:
            self.metrics.generation_tokens += emitted
            if req.first_token_at is None:
                req.first_token_at = now
                req.first_token_clock = self.clock
                self.metrics.ttft.observe(now - req.arrival)
                self.metrics.prefill_done(req.prompt_len, req.cached_tokens)
            elif req.last_token_at is not None:
                self.metrics.itl.observe(now - req.last_token_at)
        self.interval_generation += emitted
        req.last_token_at = now
        return emitted

    def _apply(
        self, decoding: list[Request], chunks: list[tuple[Request, int]], drafted: int
    ) -> None:
        now = time.monotonic()
        done: list[Request] = []
        step_tokens = 0  # prompt (or recompute) tokens and generated tokens of this step
        for req, chunk in chunks:
            if req.aborted or req not in self.running:
                continue
            was_prompt = req.computed < req.prompt_len
            req.computed += chunk
            new_prompt = max(0, min(req.computed, req.prompt_len) - (req.computed - chunk))
            if was_prompt:
                self.interval_prompt += new_prompt
            step_tokens += chunk
            if not req.prefilling:
                self._remember_prefix(req)
                if req.generated == 0:
                    step_tokens += self._emit(req, 1, now)
                if req.generated >= len(req.pieces):
                    done.append(req)
        per_step = self.timing.expected_tokens_per_step()
        for req in decoding:
            if req.aborted or req not in self.running:
                continue
            req.spec_credit += per_step
            count = int(req.spec_credit)
            req.spec_credit -= count
            count = max(1, count)
            if drafted:
                accepted = count - 1
                self.interval_drafted += drafted
                self.interval_accepted += accepted
                with self.metrics.lock:
                    self.metrics.spec_step(drafted, accepted)
            step_tokens += self._emit(req, count, now)
            if req.generated >= len(req.pieces):
                done.append(req)
        if step_tokens:
            with self.metrics.lock:
                self.metrics.step_done(step_tokens)
        for req in done:
            if req in self.running:
                self.running.remove(req)
                req.events.put(("done", (req.finish_reason, req.stop_reason)))
                self._finish_metrics(req, req.finish_reason)
        # Preempt the newest requests while the cache is over capacity (recompute later).
        while len(self.running) > 1 and self._used() > self.capacity:
            victim = self.running.pop()
            victim.computed = 0
            victim.preemptions += 1
            self.waiting.appendleft(victim)
            with self.metrics.lock:
                self.metrics.preemptions += 1

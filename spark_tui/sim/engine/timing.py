"""SIMULATED timing model of one GB10 rank (all times x SPARK_SIM_TOKEN_SCALE).

Decode is bound by memory bandwidth: every step reads the weights a batch touches plus the KV
cache of every running sequence, at GB10's 273 GB/s x an efficiency. A dense model reads all
its weights per step whatever the batch; an MoE model reads its dense part plus the experts the
batch's tokens route to, 1 - (1 - active/total)^tokens of them, so a bigger batch costs a bit
more per step but far less per token: total throughput rises with concurrency until
`max_num_seqs` caps the batch, and requests beyond it wait (num_requests_waiting).
Each extra TP rank adds two all-reduces per layer over the 200 Gb/s ConnectX-7 link
(latency + bytes). Prefill is compute bound: 2 x active params/rank FLOPs per token at an
effective tensor throughput, chunked by `max_num_batched_tokens` per step (a bigger chunk means
fewer steps, so a lower time to first token for long prompts, but a longer step for the decodes
sharing it). Prefix caching skips the cached part of a repeated prefix. MTP speculative
decoding drafts `num_speculative_tokens` per step and accepts each with ACCEPT_RATE (in
sequence), at DRAFT_COST of a step per drafted token.

| constant | value | why |
|---|---|---|
| MEM_BANDWIDTH | 273e9 B/s | GB10 LPDDR5x bandwidth |
| BANDWIDTH_EFFICIENCY | 0.72 | achieved fraction in decode kernels |
| LINK_BANDWIDTH | 25e9 B/s | ConnectX-7 200 Gb/s |
| ALLREDUCE_LATENCY | 12e-6 s | one small all-reduce over RoCE |
| STEP_OVERHEAD | 1.5e-3 s | scheduling, sampling, launch per step |
| PREFILL_FLOPS | 55e12 FLOP/s | effective GB10 tensor throughput in prefill |
| ACCEPT_RATE | 0.6 | per drafted token (MTP) |
| DRAFT_COST | 0.05 | of a decode step, per drafted token |
| BATCH_COMPUTE | 0.6e-3 s/seq | per-sequence compute added to a decode step |
"""

from __future__ import annotations

from dataclasses import dataclass

MEM_BANDWIDTH = 273e9
BANDWIDTH_EFFICIENCY = 0.72
LINK_BANDWIDTH = 25e9
ALLREDUCE_LATENCY = 12e-6
STEP_OVERHEAD = 1.5e-3
PREFILL_FLOPS = 55e12
ACCEPT_RATE = 0.6
DRAFT_COST = 0.05
BATCH_COMPUTE = 0.6e-3


@dataclass(frozen=True)
class TimingModel:
    """Per-rank numbers the step-time formulas need."""

    weight_bytes_rank: float  # weights resident on one rank
    expert_fraction: float
    experts_total: int
    experts_active: int
    params_active_rank: float
    kv_bytes_per_token: float  # per rank, all attention layers
    hidden_size: int
    layers: int
    tp: int
    num_speculative_tokens: int
    scale: float

    def experts_touched(self, tokens: int) -> float:
        """Fraction of expert weights a step with `tokens` tokens reads."""
        if self.experts_total <= 0 or tokens <= 0:
            return 0.0
        p = self.experts_active / self.experts_total
        return 1.0 - (1.0 - p) ** tokens

    def weights_read(self, tokens: int) -> float:
        """Weight bytes one step reads on one rank."""
        dense = self.weight_bytes_rank * (1.0 - self.expert_fraction)
        experts = self.weight_bytes_rank * self.expert_fraction * self.experts_touched(tokens)
        return dense + experts

    def comm(self, tokens: int) -> float:
        """All-reduce time of one step for `tokens` tokens (0 on one rank)."""
        if self.tp <= 1:
            return 0.0
        per_layer = 2 * (ALLREDUCE_LATENCY + tokens * self.hidden_size * 2 / LINK_BANDWIDTH)
        return self.layers * per_layer

    def step_time(self, decode_seqs: int, kv_tokens: int, prefill_tokens: int) -> float:
        """Seconds of one scheduler step: decodes of `decode_seqs` sequences holding
        `kv_tokens` tokens of context in total, plus `prefill_tokens` prompt tokens."""
        drafted = self.num_speculative_tokens if decode_seqs else 0
        tokens = decode_seqs * (1 + drafted) + prefill_tokens
        read = self.weights_read(max(1, tokens)) + kv_tokens * self.kv_bytes_per_token
        t = read / (MEM_BANDWIDTH * BANDWIDTH_EFFICIENCY)
        t += decode_seqs * BATCH_COMPUTE
        t *= 1.0 + DRAFT_COST * drafted
        t += prefill_tokens * 2.0 * self.params_active_rank / PREFILL_FLOPS
        t += self.comm(tokens) + STEP_OVERHEAD
        return t * self.scale

    def expected_tokens_per_step(self) -> float:
        """Tokens a decoding sequence gains per step (1 without speculative decoding)."""
        k = self.num_speculative_tokens
        if k <= 0:
            return 1.0
        a = ACCEPT_RATE
        return (1.0 - a ** (k + 1)) / (1.0 - a)

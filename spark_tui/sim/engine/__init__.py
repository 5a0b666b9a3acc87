"""SIMULATED stand-in for `vllm serve` (spark-tui simulated engine, no GPU).

Standard library only, importing nothing else from spark_tui: it is copied into container
images and run by any python3 >= 3.9 as the `vllm` executable (see `bin/vllm`).

Entry points: `python -m spark_tui.sim.engine serve MODEL [flags]` and `bin/vllm serve ...`.
Everything it prints, serves and decides is simulated and says so: the version string ends
in `+sparktui.sim` and every startup log carries the line "spark-tui simulated engine (no GPU)".

Modules: `flags` (vLLM's serve flags, read by `help_table` from real vLLM's `--help=all`
shipped beside it), `catalogue` (simulated model facts, config.json and
safetensors index per model), `memory` (node memory from the environment, the fit decisions),
`logs` (vLLM's log line format), `failures` (vLLM's error messages and tracebacks),
`rendezvous` (ranks meeting over TCP, heartbeats), `timing` (GB10 token timing model),
`scheduler` (continuous batching), `generate` (deterministic text, reasoning, tool calls),
`metrics` (Prometheus /metrics), `api` (the OpenAI-compatible HTTP server), `serve` (startup
phases and the run loop), `settings` (environment knobs).
"""

from __future__ import annotations

# Real vLLM's release it follows (its log lines, flags, API and /version), marked simulated
# by the local version label.
RELEASE = "0.32.0"
VERSION = f"{RELEASE}+sparktui.sim"
SIMULATED_BANNER = "spark-tui simulated engine (no GPU)"

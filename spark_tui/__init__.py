"""spark-tui: run one vLLM service across several DGX Sparks from a terminal cockpit."""

__version__ = "0.1.0"

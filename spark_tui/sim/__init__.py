"""Simulated Sparks: a vLLM stand-in, simulated nodes and the namespace lab. All simulated."""

"""SIMULATED Hugging Face Hub: a local stand-in of the Hub's HTTP API on 127.0.0.1, reached
through HF_ENDPOINT, serving the simulated catalogue's models (config.json, safetensors
index, shards with real safetensors headers and zero-filled data). The real Hub cannot be
reached here; everything this package serves is simulated."""

from spark_tui.sim.hub.catalogue_hub import catalogue_hub
from spark_tui.sim.hub.repos import SafetensorsFile, SimulatedRepo, catalogue_repo
from spark_tui.sim.hub.server import SimulatedHub

__all__ = ["SafetensorsFile", "SimulatedHub", "SimulatedRepo", "catalogue_hub", "catalogue_repo"]

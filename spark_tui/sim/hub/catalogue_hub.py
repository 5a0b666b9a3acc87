"""The SIMULATED Hub holding every model of the simulated catalogue (for the demo)."""

from __future__ import annotations

from spark_tui.sim.engine import catalogue
from spark_tui.sim.hub.repos import catalogue_repo
from spark_tui.sim.hub.server import SimulatedHub
from spark_tui.sim.nodes.hf_cache import bundled_models, revision_of


def catalogue_hub(token: str | None = None, port: int = 0) -> SimulatedHub:
    """A (not yet started) simulated Hub with the catalogue's models at the commits the
    simulated nodes' caches hold, gated models open to `token` only."""
    pinned = dict(bundled_models())
    repos = []
    for model_id, spec in catalogue.CATALOGUE.items():
        granted = frozenset({token}) if token else frozenset()
        sha = revision_of(model_id, pinned.get(model_id))
        repos.append(catalogue_repo(model_id, gated=spec.gated, granted=granted, sha=sha))
    return SimulatedHub(repos, port=port)

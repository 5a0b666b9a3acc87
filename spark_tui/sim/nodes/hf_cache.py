"""A simulated node's Hugging Face cache: every bundled recipe's model, from the engine's
simulated catalogue (config.json, safetensors index, shards as sparse files).

The layout is the hub cache's: `hub/models--ORG--NAME/{refs/main, blobs/<hash>,
snapshots/<rev>/<file> -> ../../blobs/<hash>}`. Shards are sparse: their apparent size
(what `du -b` counts) is the checkpoint's, yet they take no disk space.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from spark_tui.sim.engine import catalogue
from spark_tui.sim.nodes.bundled import bundled_recipes

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def bundled_models() -> list[tuple[str, str | None]]:
    """(model id, pinned revision) of every catalogue model a bundled recipe names,
    including models named in its command (a speculative draft model, say)."""
    found: dict[str, str | None] = {}
    for recipe in bundled_recipes():
        if catalogue.lookup(recipe.model) is not None:
            found.setdefault(catalogue.canonical_id(recipe.model), recipe.model_revision)
        text = " ".join([recipe.command, json.dumps(recipe.defaults, default=str)])
        for model_id in catalogue.CATALOGUE:
            if model_id in text:
                found.setdefault(model_id, None)
    return sorted(found.items())


def revision_of(model_id: str, pinned: str | None = None) -> str:
    """The snapshot's commit: the recipe's pinned one, else one derived from the id."""
    if pinned and _COMMIT.match(pinned):
        return pinned
    return hashlib.sha1(f"simulated snapshot {model_id}".encode()).hexdigest()


def repo_dir(hub: Path, model_id: str) -> Path:
    return hub / ("models--" + model_id.replace("/", "--"))


def _blob(repo: Path, snapshot: Path, name: str, digest: str) -> Path:
    """The blob for `name`, linked from the snapshot as the hub does."""
    blob = repo / "blobs" / digest
    link = snapshot / name
    if not link.is_symlink():
        link.symlink_to(os.path.relpath(blob, link.parent))
    return blob


def add_model(hub: Path, model_id: str, pinned: str | None = None) -> Path:
    """Put one model in the cache under `hub`; returns its snapshot directory."""
    rev = revision_of(model_id, pinned)
    repo = repo_dir(hub, model_id)
    snapshot = repo / "snapshots" / rev
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    for name, doc in (
        ("config.json", catalogue.hf_config(model_id)),
        ("model.safetensors.index.json", catalogue.safetensors_index(model_id)),
    ):
        data = (json.dumps(doc, indent=2) + "\n").encode()
        blob = _blob(repo, snapshot, name, hashlib.sha256(data).hexdigest())
        if not blob.exists():
            blob.write_bytes(data)
    for name, size in catalogue.shard_files(model_id):
        digest = hashlib.sha256(f"simulated shard {model_id} {name} {size}".encode()).hexdigest()
        blob = _blob(repo, snapshot, name, digest)
        if not blob.exists():
            with blob.open("wb") as f:
                f.truncate(size)  # sparse: the apparent size only
    return snapshot


def populate_hf_cache(home: Path, models: list[tuple[str, str | None]] | None = None) -> list[Path]:
    """Fill `home/.cache/huggingface/hub` with `models` (default: the bundled ones)."""
    hub = home / ".cache" / "huggingface" / "hub"
    hub.mkdir(parents=True, exist_ok=True)
    chosen = bundled_models() if models is None else models
    return [add_model(hub, model_id, pinned) for model_id, pinned in chosen]

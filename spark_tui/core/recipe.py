"""The `Recipe` type: a sparkrun v1/v2 recipe as loaded, unknown keys kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Recipe:
    """A recipe: model, runtime, container, defaults (the settings), env and command template.

    `runtime` is resolved (`vllm` becomes `vllm-distributed` unless the recipe hints Ray);
    `runtime_declared` is what the file said. `extra` keeps every key this tool does not
    know, so a recipe round-trips unchanged. `source` is "path", "user" or "bundled".
    """

    name: str
    model: str
    command: str
    runtime: str = "vllm-distributed"
    runtime_declared: str | None = None
    recipe_version: str = "2"
    description: str = ""
    model_revision: str | None = None
    container: str | None = None
    min_nodes: int = 1
    max_nodes: int | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    executor: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    source: str = "bundled"

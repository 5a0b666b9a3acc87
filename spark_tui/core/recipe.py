"""The `Recipe` type: a sparkrun v1/v2 recipe as loaded, unknown keys kept."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from spark_tui.core.errors import RecipeError

# Runtimes spark-tui runs: vLLM's two multi-node forms, and eugr's vLLM build (v1 recipes).
VLLM_RUNTIMES = ("vllm-distributed", "vllm-ray", "eugr-vllm")


@dataclass(frozen=True)
class PrelaunchStep:
    """One step run in a rank's container before the serve command, as sparkrun's `pre_exec`.

    `copy`: the file or folder `source` on the control machine is put at `dest` in the
    container. `exec`: the shell code `command` runs in the container (a mod's is
    `export WORKSPACE_DIR=$PWD && cd /workspace/mods/<name> && chmod +x run.sh && ./run.sh`).
    `mod` names the mod the step belongs to (None for the recipe's own `pre_exec`).
    """

    kind: str
    source: str = ""
    dest: str = ""
    command: str = ""
    mod: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        if self.kind == "copy":
            return {"kind": "copy", "source": self.source, "dest": self.dest, "mod": self.mod}
        return {"kind": "exec", "command": self.command, "mod": self.mod}


@dataclass(frozen=True)
class MissingFile:
    """A `mods:` entry (or a `pre_exec` copy source) that was not found, and where it was
    looked for, in order."""

    ref: str
    kind: str  # "mod" or "pre_exec copy"
    tried: tuple[str, ...]


@dataclass
class Recipe:
    """A recipe: model, runtime, container, defaults (the settings), env and command template.

    `runtime` is resolved (`vllm` becomes `vllm-distributed` unless the recipe hints Ray);
    `runtime_declared` is what the file said. `extra` keeps every key this tool does not
    know, so a recipe round-trips unchanged. `source` is "path", "user", "registry" (a git
    registry named in spark-tui's config), "sparkrun" (a registry clone sparkrun keeps) or
    "bundled"; `registry` names the registry for the last two. `prelaunch` holds the steps
    run in every rank's container before `vllm serve` (the recipe's `pre_exec`, then its
    `mods`), resolved on the control machine; `missing` what could not be found.
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
    registry: str | None = None
    mods: list[str] = field(default_factory=list)
    prelaunch: list[PrelaunchStep] = field(default_factory=list)
    missing: list[MissingFile] = field(default_factory=list)
    # A registry recipe in a sub-folder that an earlier file of its registry hides by name:
    # its path under the registry's recipes folder, without the suffix
    # (`3x-spark-cluster/NAME`), the name that reaches it (sparkrun's path-qualified name).
    ref: str | None = None
    # What `sparkrun run` takes for this recipe (`@experimental/NAME` for a registry sparkrun
    # hides from plain names); None when sparkrun does not know the recipe's source.
    sparkrun_name: str | None = None

    @property
    def origin(self) -> str:
        """Where the recipe comes from, as listings show it (`sparkrun:eugr`, `user`)."""
        return f"{self.source}:{self.registry}" if self.registry else self.source

    @property
    def listed_name(self) -> str:
        """The name listings show and lookups take: the sub-folder path, else the name."""
        return self.ref or self.name


def require_vllm(recipe: Recipe) -> None:
    """Refuse a recipe whose runtime is not vLLM (sglang, llama-cpp, trtllm, ...)."""
    if recipe.runtime in VLLM_RUNTIMES:
        return
    raise RecipeError(
        f"{recipe.name}: its runtime is {recipe.runtime!r}, not vLLM; spark-tui runs vLLM "
        "services only",
        "pick a vLLM recipe (runtime: vllm, vllm-distributed or vllm-ray), or run this one "
        f"with the launcher made for its runtime (e.g. `sparkrun run {_sparkrun_arg(recipe)}`)",
    )


def _sparkrun_arg(recipe: Recipe) -> str:
    # sparkrun finds its own registries' recipes by name; any other by its file path.
    return shlex.quote(recipe.sparkrun_name or recipe.path or recipe.name)

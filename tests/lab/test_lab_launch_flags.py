"""`spark-tui launch` on the stand-in lab asks the head's image for its `vllm serve` flags
before any container is created (the same check as `check`): a misspelt flag refuses the
launch naming the flag and the image, --force or not, and leaves no container on any node
(the throwaway one that printed the help included)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from labkit import lab_guard

from spark_tui.core.recipe_loader import find_recipe
from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.dockerd import containers

lab_guard()

pytestmark = pytest.mark.lab

RECIPE = "glm-5.3-flash"


def test_launch_refuses_a_misspelt_flag_before_any_container_is_created(
    lab: Lab, tmp_path: Path
) -> None:
    inventory = tmp_path / "lab.yaml"
    lab.write_inventory(inventory)
    recipe = find_recipe(RECIPE)
    assert recipe.path is not None and recipe.container
    bad = tmp_path / "misspelt.yaml"
    text = Path(recipe.path).read_text().rstrip("\n")
    bad.write_text(text + " \\\n    --enable-prefix-cachin\n")
    res = subprocess.run(
        [sys.executable, "-m", "spark_tui", "launch", str(bad), "--inventory", str(inventory)]
        + ["--wait", "--force"],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    said = res.stdout + res.stderr
    assert res.returncode == 1, said[-3000:]
    assert "refused before any container was created" in said, said[-3000:]
    assert "--enable-prefix-cachin is not a flag of the vLLM in " + recipe.container in said
    assert "did you mean --enable-prefix-caching?" in said
    assert "rank 0" not in said, "no rank was started"
    for node in lab.nodes:
        assert containers(node.docker_socket) == [], f"a container is left on {node.name}"

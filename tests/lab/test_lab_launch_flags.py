"""`spark-tui launch` on the stand-in lab asks the head's image for its `vllm serve` flags
(the same check as `check`): a misspelt flag refuses the launch naming the flag and the
image, --force or not, and leaves no container on any node (the throwaway one that printed
the help included). With the image's flag table kept on this machine the refusal comes
before any container is created; on a first launch of the image the ranks may have started
beside the help run, and are stopped and removed, in the same words."""

from __future__ import annotations

import os
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


def _launch_misspelt(lab: Lab, tmp_path: Path, cache: Path) -> tuple[str, str]:
    """`spark-tui launch` of the recipe with a misspelt flag: (what it said, the image)."""
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
        env={**os.environ, "SPARK_TUI_CACHE_DIR": str(cache)},
    )
    said = res.stdout + res.stderr
    assert res.returncode == 1, said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    assert "--enable-prefix-cachin is not a flag of the vLLM in " + recipe.container in said
    assert "did you mean --enable-prefix-caching?" in said
    assert f"--force does not skip this: the vLLM in {recipe.container} exits at once" in said
    for node in lab.nodes:
        assert containers(node.docker_socket) == [], f"a container is left on {node.name}"
    return said, recipe.container


def test_a_misspelt_flag_on_a_first_launch_leaves_no_container_and_says_why(
    lab: Lab, tmp_path: Path
) -> None:
    said, _image = _launch_misspelt(lab, tmp_path, tmp_path / "empty-cache")
    refused = "launch of misspelt refused"  # (the recipe file's name)
    # Before the ranks (the help run was quicker) or after them, in the same words.
    assert (
        f"{refused} before any container was created: " in said
        or f"{refused} (its ranks, started while the image's flags were read, were stopped "
        "and removed): "
        in said
    ), said[-3000:]


def test_launch_refuses_a_misspelt_flag_before_any_container_is_created(
    lab: Lab, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    _launch_misspelt(lab, tmp_path, cache)  # the image's table is kept from here on
    said, _image = _launch_misspelt(lab, tmp_path, cache)
    assert "launch of misspelt refused before any container was created" in said, said[-3000:]
    assert "rank 0" not in said, "no rank was started"

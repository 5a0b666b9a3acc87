"""A headless launch says what it decided and why, once: a refusal no terminal could confirm
names the verdict, its reason and the flag that insists; `launch --wait` says "launching" and
where the API is once, not again at ready."""

from __future__ import annotations

from pathlib import Path

from spark_tui.core.recipe_loader import find_recipe
from tests.cli.conftest import GLM, Cli, SimProcess

RECIPE = "glm-5.3-flash"


def _said(res: object) -> str:
    return f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"  # type: ignore[attr-defined]


def test_a_launch_of_unknown_fit_without_a_terminal_says_why_it_did_not_launch(
    cli: Cli, sim: SimProcess, tmp_path: Path
) -> None:
    # A model no node caches, with the Hub out of reach (the CLI's HF_ENDPOINT is a closed
    # port): no facts, so the fit cannot be checked.
    source = find_recipe(RECIPE).path
    assert source is not None
    recipe = tmp_path / "unknown-model.yaml"
    recipe.write_text(Path(source).read_text().replace(GLM, "someone/unknown-model-7B"))
    res = cli.run("launch", str(recipe), "--inventory", str(sim.inventory), timeout=120)
    assert res.returncode == 1, _said(res)
    assert "no terminal to ask" not in res.stderr, res.stderr
    decision, remedy = res.stderr.splitlines()[-2:]
    assert decision.startswith(
        "spark-tui: not launching unknown-model: fit unknown (cannot tell whether it fits; "
        "missing model facts of someone/unknown-model-7B: weight_bytes"
    ), res.stderr
    assert decision.endswith("); no terminal could confirm launching anyway"), res.stderr
    assert remedy.startswith("  remedy: add weight_bytes") and remedy.endswith(
        "or pass --force to launch anyway"
    ), res.stderr
    assert res.stderr.count("not launching") == 1, res.stderr
    status = cli.run("status", "--inventory", str(sim.inventory), timeout=60)
    assert "no spark-tui containers" in status.stderr, _said(status)


def test_launch_wait_says_launching_and_the_endpoint_once(cli: Cli, sim: SimProcess) -> None:
    res = cli.run("launch", RECIPE, "--inventory", str(sim.inventory), "--wait", timeout=120)
    try:
        assert res.returncode == 0, _said(res)
        assert "ready" in res.stdout, _said(res)
        assert res.stderr.count(f"launching {RECIPE} as cluster") == 1, res.stderr
        assert res.stderr.count("  from your machine: ssh -N -L") == 1, res.stderr
        assert res.stderr.index("API on") < res.stderr.index("is ready"), res.stderr
    finally:
        stopped = cli.run("stop", "--inventory", str(sim.inventory), timeout=60)
        assert stopped.returncode == 0, _said(stopped)

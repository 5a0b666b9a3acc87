"""The session's lab: two simulated Sparks (namespaces with real sshd and dockerd), brought
up once for the tests/lab modules that ask for it and taken down at the end, even on failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from labkit import (
    claim,
    footprint,
    lab_guard,
    leftovers,
    running_lab,
    sweep_stale_test_labs,
    unique_config,
)

from spark_tui.core.inventory import InventoryNode
from spark_tui.sim.lab import Lab


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    """A 2-node lab with a fast engine pace; down (and checked clean) after the session."""
    lab_guard()  # (the modules' own guard normally stops before this)
    sweep_stale_test_labs()
    cfg = unique_config(2, memory_gb=128, pace=0.05, token_scale=0.02)
    with running_lab(cfg) as the_lab:
        yield the_lab


@pytest.fixture(scope="session")
def lab_nodes(lab: Lab) -> list[InventoryNode]:
    """The lab's inventory (head first), as `lab up --inventory` writes it."""
    return lab.inventory_nodes()


@pytest.fixture(scope="session")
def vllm_lab() -> Iterator[Lab]:
    """A 2-node lab whose image runs real vLLM (CPU build) with the tiny model in every
    node's cache; shared by the whole session (each real launch costs about 90 s here)."""
    lab_guard()
    sweep_stale_test_labs()
    cfg = unique_config(2, memory_gb=128, engine="vllm")
    claim(cfg)
    the_lab = Lab(cfg)
    try:
        the_lab.up()
        fp = footprint(the_lab)
        yield the_lab
    finally:
        left = the_lab.down(quiet=True)
    assert not left, f"lab down left: {left}"
    assert not leftovers(fp), f"lab down left: {leftovers(fp)}"


@pytest.fixture(scope="session")
def vllm_flag_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder ($SPARK_TUI_CACHE_DIR) the real-vLLM modules share, as a user's machine
    keeps one: the lab image's `vllm serve --help=all` (40 s or more of imports on two cores)
    runs once per image id in the session, not before every launch."""
    return tmp_path_factory.mktemp("flag-cache")


@pytest.fixture
def shared_flag_cache(vllm_flag_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The session's flag cache as this test's $SPARK_TUI_CACHE_DIR (its commands read the
    image's flag table where the earlier ones kept it)."""
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(vllm_flag_cache))
    return vllm_flag_cache

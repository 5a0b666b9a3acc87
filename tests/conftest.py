"""Shared test setup: every test gets its own config and data folders, so a developer's
recipes, themes and run history never leak into a test, nor a test's into them."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("SPARK_TUI_SPARKRUN_HOME", str(home / "sparkrun-home"))
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(home / "data" / "spark-tui"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("SPARK_TUI_CACHE_DIR", str(home / "cache" / "spark-tui"))
    # No test reaches the real Hugging Face Hub: a closed local port refuses at once, and
    # tests that want a Hub start the simulated one and point HF_ENDPOINT at it.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

"""Shared test setup: every test gets its own config and data folders, so a developer's
recipes, themes and run history never leak into a test, nor a test's into them."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

# Under CI every test must run: a test that would skip (something it needs is missing) fails
# there with its reason instead, so a green CI never hides a test that did not run.
UNDER_CI = os.environ.get("CI", "").lower() in ("true", "1")


def _failed_instead(report: pytest.TestReport | pytest.CollectReport) -> None:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    report.outcome = "failed"
    report.longrepr = f"would skip, but under CI=true every test must run: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if UNDER_CI and report.skipped and not hasattr(report, "wasxfail"):
        _failed_instead(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if UNDER_CI and report.skipped:
        _failed_instead(report)


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
    # Nor a public container registry: a sentinel image resolves against a closed port
    # unless the test starts a registry and points this setting at it.
    monkeypatch.setenv(
        "SPARK_TUI_REGISTRY_ENDPOINTS", "ghcr.io=http://127.0.0.1:9,docker.io=http://127.0.0.1:9"
    )

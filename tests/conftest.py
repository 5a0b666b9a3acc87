"""Shared test setup: every test gets its own config and data folders, so a developer's
recipes, themes and run history never leak into a test, nor a test's into them; the suite's
split over pytest-xdist workers (`--dist loadgroup`, see pyproject.toml) is decided here."""

from __future__ import annotations

import faulthandler
import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
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


# A thread left waiting on a socket nobody serves holds the interpreter's exit (which joins
# it) and with it the whole CI run, silently. Once pytest is done nothing should take long:
# a run that has not exited this long after prints every thread's stack and fails.
EXIT_GRACE_S = 300


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # Not in an xdist worker: a worker unconfigures as soon as it has no more tests, then
    # waits (alive, rightly) until the controller ends the session, which takes as long as
    # the other worker's last tests (the serial lab group: longer than the grace). The
    # controller, or a run without workers, is watched from its own end.
    if UNDER_CI and not hasattr(config, "workerinput"):
        faulthandler.dump_traceback_later(EXIT_GRACE_S, exit=True, file=sys.__stderr__)


# The tests that run one at a time, in one xdist group on one worker: the namespace lab with its
# real sshd, dockerd and real vLLM (root-wide names, iptables rules, and CPU enough for one
# real engine on a 2-core machine). Every other test is safe beside another: loopback
# addresses and ports of its own, its own temp and XDG folders, tmux sockets named by pid.
SERIAL_GROUP = "serial"
SERIAL_MARKERS = ("lab", "vllm")
SERIAL_DIRS = (Path(__file__).resolve().parent / "lab",)


def _runs_alone(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(name) for name in SERIAL_MARKERS):
        return True
    path = item.path.resolve()
    return any(path.is_relative_to(d) for d in SERIAL_DIRS)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the tests' ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the lab tests in the serial group and each other module in a group of its own,
    so a module's module-scoped fixtures (a `spark-tui sim`, an engine) start once."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        item.add_marker(
            pytest.mark.xdist_group(SERIAL_GROUP if _runs_alone(item) else _module(item))
        )


def _module(item: pytest.Item) -> str:
    """A short group name for the test's module ("cli/test_contract"): xdist appends it to
    the test's id."""
    path = item.path.resolve().with_suffix("")
    here = Path(__file__).resolve().parent
    return str(path.relative_to(here)) if path.is_relative_to(here) else str(path)


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


@pytest.fixture(scope="module")
def local_registry(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, str]]]:
    """A real registry server (Debian's docker-registry) on a loopback port, holding the
    eugr nightly's repository: (its base URL, the digests pushed by name): "old" tagged
    2026-11-28, "new" tagged 2026-12-02 and latest, "other" under tags that are no dated
    nightly (never the newest, however they sort). Skips (fails under CI) without the
    server."""
    from spark_tui.core.errors import SparkError
    from spark_tui.sim.lab.registry import LoopbackRegistry, push_blob_image, registry_binary

    try:
        registry_binary()
    except SparkError as exc:
        pytest.skip(f"{exc.message} ({exc.remedy})")
    server = LoopbackRegistry(tmp_path_factory.mktemp("registry"), 0).start()
    repo = "spark-arena/dgx-vllm-eugr-nightly"
    try:
        base = server.base_url
        yield (
            base,
            {
                "old": push_blob_image(base, repo, ["2026-11-28"], "nightly of 28 Nov"),
                "new": push_blob_image(base, repo, ["2026-12-02", "latest"], "nightly of 2 Dec"),
                "other": push_blob_image(base, repo, ["zz-experimental", "9999"], "experiment"),
            },
        )
    finally:
        server.stop()

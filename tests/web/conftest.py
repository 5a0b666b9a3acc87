"""The web demo's tests drive `screenshots/browser_demo.py`, the script that also takes the
README's browser screenshot: one way of starting, driving and reading the web demo."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "screenshots" / "browser_demo.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("browser_demo", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def browser_demo() -> ModuleType:
    return load_script()


@pytest.fixture
def server_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def chromium_path(browser_demo: ModuleType) -> str:
    """The system Chromium and Playwright, required under CI=true (.ci/run installs both)."""
    missing = []
    path = browser_demo.chromium()
    if path is None:
        missing.append("Chromium (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("Playwright (pip install -e '.[test]')")
    if missing:
        why = "the browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(why + ": CI must run it")
        pytest.skip(why)
    return str(path)

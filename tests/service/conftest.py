"""Fixtures for the service tests: a private data dir with recognisable secrets in the env,
and the ops tests' helpers (the simulated engine as subprocesses) on the import path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))

from ops_helpers import FAKE_API_KEY, FAKE_HF_TOKEN  # noqa: E402


@pytest.fixture(autouse=True)
def private_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes its history under its own tmp dir, with secrets in the env."""
    data = tmp_path / "data"
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(data))
    monkeypatch.setenv("HF_TOKEN", FAKE_HF_TOKEN)
    monkeypatch.setenv("VLLM_API_KEY", FAKE_API_KEY)
    return data

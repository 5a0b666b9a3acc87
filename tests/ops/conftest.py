"""Fixtures for the ops tests: a private data dir and recognisable secrets in the env."""

from __future__ import annotations

from pathlib import Path

import pytest
from ops_helpers import FAKE_API_KEY, FAKE_HF_TOKEN


@pytest.fixture(autouse=True)
def private_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes its history under its own tmp dir, with secrets in the env."""
    data = tmp_path / "data"
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(data))
    monkeypatch.setenv("HF_TOKEN", FAKE_HF_TOKEN)
    monkeypatch.setenv("VLLM_API_KEY", FAKE_API_KEY)
    return data

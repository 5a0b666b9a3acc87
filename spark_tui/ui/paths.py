"""Where the cockpit finds the user's files (themes, config)."""

from __future__ import annotations

from pathlib import Path

import platformdirs


def user_config_dir() -> Path:
    """The user's spark-tui config folder (config.yaml, themes/, recipes/)."""
    return Path(platformdirs.user_config_dir("spark-tui"))

"""Where the cockpit finds bundled and user files (themes, config)."""

from __future__ import annotations

from pathlib import Path

import platformdirs

PACKAGE_DIR = Path(__file__).resolve().parent.parent


def bundled_dir(kind: str) -> Path:
    """The bundled `themes/` (or other) folder: the checkout's, else the wheel's copy."""
    checkout = PACKAGE_DIR.parent / kind
    if checkout.is_dir():
        return checkout
    return PACKAGE_DIR / "_bundled" / kind


def user_config_dir() -> Path:
    """The user's spark-tui config folder (config.yaml, themes/, recipes/)."""
    return Path(platformdirs.user_config_dir("spark-tui"))

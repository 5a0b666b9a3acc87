"""The user's cockpit config: theme, key remaps, default nodes (config dir `config.yaml`).

```yaml
theme: spark-light
keys:            # binding id -> key(s), e.g. launch the selected recipe with F5
  launch: f5
  stop: ctrl+s
inventory: ~/sparks.yaml
keep_failed: true  # when a rank fails, keep every rank for inspection (k toggles)
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from spark_tui.core.errors import InputError
from spark_tui.ui.paths import user_config_dir


@dataclass
class CockpitConfig:
    """What the config file may set."""

    theme: str | None = None
    keys: dict[str, str] = field(default_factory=dict)
    inventory: str | None = None
    keep_failed: bool = False


def load_config(path: Path | None = None) -> CockpitConfig:
    """Read the config file; a missing file is an empty config."""
    path = path or user_config_dir() / "config.yaml"
    if not path.is_file():
        return CockpitConfig()
    import yaml  # only when there is a file: the first frame does not wait for it

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise InputError(
            f"{path}: not valid YAML ({exc})", "fix or remove the config file"
        ) from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping", "see the example in the README")
    keys = data.get("keys") or {}
    if not isinstance(keys, dict):
        raise InputError(f"{path}: `keys` must map binding ids to keys", "e.g. keys: {launch: f5}")
    inventory = data.get("inventory")
    keep_failed = data.get("keep_failed", False)
    if not isinstance(keep_failed, bool):
        raise InputError(f"{path}: `keep_failed` must be true or false", "e.g. keep_failed: true")
    return CockpitConfig(
        keep_failed=keep_failed,
        theme=data.get("theme"),
        keys={str(k): str(v) for k, v in keys.items()},
        inventory=str(Path(inventory).expanduser()) if inventory else None,
    )

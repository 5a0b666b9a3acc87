"""Host lists as sparkrun users keep them: a hosts file (one host per line, `#` comments) and
the host groups sparkrun saved (`sparkrun cluster create NAME`): one YAML file per group in
`~/.config/sparkrun/clusters/NAME.yaml` (`hosts:`, optional `user:`). Each is turned into
the `--hosts` list spark-tui takes (`[user@]host[:port]`, head first). Only files are read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from spark_tui.core.errors import InputError
from spark_tui.core.registry import sparkrun_config_dir

# sparkrun's own rule for a group's name (it refuses any other).
_GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def hosts_from_text(text: str) -> list[str]:
    """The hosts of a hosts file's text: one per line, `#` to the end of a line a comment."""
    hosts = []
    for line in text.splitlines():
        host = line.split("#", 1)[0].strip()
        if host:
            hosts.append(host)
    return hosts


def _read(path: Path, what: str, remedy: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist", remedy) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what} {path}: {exc}", remedy) from None


def hosts_file(path: str | Path) -> list[str]:
    """The hosts of a hosts file (sparkrun's `--hosts-file`), refused when it names none."""
    p = Path(path).expanduser()
    remedy = "give a file with one host per line (`#` starts a comment), head first"
    hosts = hosts_from_text(_read(p, "hosts file", remedy))
    if not hosts:
        raise InputError(f"hosts file {p} names no host", remedy)
    return hosts


def clusters_dir() -> Path:
    """Where sparkrun keeps its saved host groups: `~/.config/sparkrun/clusters`."""
    return sparkrun_config_dir() / "clusters"


def saved_groups() -> list[str]:
    """The names of sparkrun's saved host groups, sorted."""
    folder = clusters_dir()
    if not folder.is_dir():
        return []
    return sorted(
        p.stem
        for p in folder.glob("*.yaml")
        if not p.name.endswith(".manifest.yaml") and _GROUP_NAME.fullmatch(p.stem)
    )


def sparkrun_group(name: str) -> list[str]:
    """The hosts of sparkrun's saved group `name`, each as `user@host` when the group names
    its SSH user."""
    folder = clusters_dir()
    known = ", ".join(saved_groups()) or "(none saved)"
    remedy = (
        f"use one of: {known} (sparkrun keeps them in {folder}; `sparkrun cluster list` shows "
        "them), or give --hosts H1,H2"
    )
    if not _GROUP_NAME.fullmatch(name):
        raise InputError(f"{name!r} is not a sparkrun host group name", remedy)
    path = folder / f"{name}.yaml"
    text = _read(path, f"sparkrun host group {name!r}:", remedy)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(
            f"sparkrun host group {path}: not valid YAML ({str(exc).splitlines()[0]})", remedy
        ) from None
    raw = data.get("hosts") if isinstance(data, Mapping) else None
    if not isinstance(raw, list) or not all(isinstance(h, str) and h.strip() for h in raw):
        raise InputError(f"sparkrun host group {path} lists no hosts (`hosts:`)", remedy)
    user = data.get("user") if isinstance(data, Mapping) else None
    return [f"{user}@{h.strip()}" if user and "@" not in h else h.strip() for h in raw if h.strip()]

"""What each web visitor's demo cockpit runs with, passed to its process as one JSON
argument (the visitor is no command line: it reads exactly these fields, nothing else)."""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class DemoOptions:
    """What each visitor's demo cockpit runs with."""

    nodes: int
    memory_gb: int
    recipe: str | None
    theme: str | None
    pace: float
    token_scale: float
    ring: bool

    def command(self) -> str:
        """The shell command textual-serve runs per visitor (exec: the server is its parent,
        so the visitor notices the server's death)."""
        argv = [sys.executable, "-m", "spark_tui.ui.web.visitor", self.to_json()]
        return "exec " + shlex.join(argv)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DemoOptions:
        """The options `to_json` wrote; a missing or unknown field is a ValueError."""
        raw = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(raw, dict) or set(raw) != names:
            raise ValueError(f"visitor options must be exactly the fields {sorted(names)}")
        return cls(**raw)

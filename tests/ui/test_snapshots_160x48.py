"""SVG snapshots of the cockpit's main states at 160x48 (see snapshot_states.py).

Update the baselines with `pytest tests/ui/test_snapshots_160x48.py --snapshot-update` and
look at them before committing.
"""

from __future__ import annotations

import pytest
from snapshot_states import STATES, make_app


@pytest.mark.parametrize("state", list(STATES))
def test_snapshot(snap_compare, state: str) -> None:  # type: ignore[no-untyped-def]
    backend_kw, run_before = STATES[state]
    assert snap_compare(make_app(**backend_kw), terminal_size=(160, 48), run_before=run_before)

"""What the user's terminal shows comes from spark-tui: the libraries it loads print no
warnings of their own (asyncssh names cryptography's deprecated DSA types at import)."""

from __future__ import annotations

import subprocess
import sys


def test_loading_every_layer_prints_nothing() -> None:
    modules = "spark_tui.cli, spark_tui.remote.ssh, spark_tui.ops.model_sync, spark_tui.sim.nodes"
    res = subprocess.run(
        [sys.executable, "-c", f"import {modules}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr == "", res.stderr

"""`python -m spark_tui.sim.engine serve MODEL [flags]`: the SIMULATED `vllm` command."""

from __future__ import annotations

from spark_tui.sim.engine.serve import main

raise SystemExit(main())

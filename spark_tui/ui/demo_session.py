"""The demo's session: simulated Sparks started in this process, then reached over SSH
exactly like real ones (the session itself is the product's)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import SparkError
from spark_tui.service.session import Session

if TYPE_CHECKING:
    from spark_tui.ops.bench import BenchConfig


class DemoSession(Session):
    """A session over simulated Sparks that it starts (`start`) and ends (`close`)."""

    simulated = True

    def __init__(
        self,
        *,
        nodes: int = 2,
        memory_gb: int = 128,
        pace: float = 0.5,
        token_scale: float = 1.0,
        worker_dies_after: float | None = None,
        page_cache_gb: float = 0.0,
        state_dir: Path | None = None,
        bench_config: BenchConfig | None = None,
        base_address: str | None = None,
    ) -> None:
        super().__init__(
            [],
            bench_config=bench_config,
            label=f"DEMO · {nodes} simulated {memory_gb} GB Sparks (no GPU)",
            reattach_hint="the simulated Sparks end with the demo",
        )
        self.scenario_args: dict[str, Any] = dict(
            nodes=nodes,
            memory_gb=memory_gb,
            pace=pace,
            token_scale=token_scale,
            worker_dies_after=worker_dies_after,
            page_cache_gb=page_cache_gb,
            ssh_port=0,
        )
        self.state_dir = state_dir
        self.base_address = base_address
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.sim: Any = None

    async def start(self) -> None:
        if self.sim is not None:
            return
        from spark_tui.sim.nodes import Scenario, SimCluster, random_loopback_base

        if self.state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="spark-tui-demo-")
            self.state_dir = Path(self._tmp.name)
        # The usual addresses (127.0.0.11, .12, ...) first; another demo or test may hold
        # them, so fall back to a random loopback range.
        error: OSError | None = None
        for base in (self.base_address, random_loopback_base()):
            extra = {"base_address": base} if base else {}
            scenario = Scenario(**self.scenario_args, **extra)
            self.sim = SimCluster(scenario, state_dir=self.state_dir)
            try:
                await self.sim.start()
                break
            except OSError as exc:
                await self.sim.close()
                error = exc
        else:
            self.sim = None
            raise SparkError(
                f"could not start the simulated Sparks: {error}",
                "free the loopback addresses 127.0.0.x or run `spark-tui demo` again",
            )
        self.inventory = list(self.sim.inventory)

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            if self.sim is not None:
                await self.sim.close()
                self.sim = None
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

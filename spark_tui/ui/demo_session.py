"""The demo's session: simulated Sparks started in this process, then reached over SSH
exactly like real ones (the session itself is the product's)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import SparkError
from spark_tui.core.facts import NodeFacts
from spark_tui.service.session import Session

if TYPE_CHECKING:
    from spark_tui.ops.bench import BenchConfig
    from spark_tui.service.history import History


# Not a secret: the SIMULATED Hub's gated models open to it.
SIMULATED_HUB_TOKEN = "hf_simulated_demo_hub"


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
        self.hub: Any = None
        self._demo_history: History | None = None

    @property
    def history(self) -> History:
        """The demo's own history: simulated runs never meet the user's real ones. Opened
        when first used: its records load pydantic's models, which the first frame (and a
        demo nobody launches in) never needs."""
        if self._demo_history is None:
            from spark_tui.service.history import History

            self._demo_history = History.demo()
        return self._demo_history

    async def start(self) -> None:
        if self.sim is not None:
            return
        from spark_tui.sim.nodes import Scenario, SimCluster

        if self.state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="spark-tui-demo-")
            self.state_dir = Path(self._tmp.name)
        # Free loopback addresses (127.0.0.11, .12, ... when nobody holds them), so another
        # demo or `spark-tui sim` never shares them; a loop of their own beside Textual's,
        # since Textual's eager task factory (3.12+) stalls asyncssh's server-side auth.
        extra = {"base_address": self.base_address} if self.base_address else {}
        sim = SimCluster(
            Scenario(**self.scenario_args, **extra),
            state_dir=self.state_dir,
            free_addresses=True,
            own_loop=True,
        )
        try:
            await sim.start()
        except OSError as exc:
            await sim.close()
            raise SparkError(
                f"could not start the simulated Sparks: {exc}",
                "free some loopback addresses 127.x.y.z (stop other demos or `spark-tui sim`), "
                "then run `spark-tui demo` again",
            ) from None
        self.sim = sim
        self.inventory = list(self.sim.inventory)
        # A download on this machine stays in the demo's own folder.
        self.sync_cache = self.state_dir / "control-hf-cache"

    def sync_env(self) -> dict[str, str]:
        """A sync's downloads come from a SIMULATED Hub with the catalogue's models (the
        real Hub is never asked from the demo), started on the first sync."""
        from spark_tui.sim.hub import catalogue_hub

        if self.hub is None:
            self.hub = catalogue_hub(token=SIMULATED_HUB_TOKEN).start()
        env = super().sync_env()
        env.pop("HF_HUB_OFFLINE", None)
        # The user's token is for the real Hub: the simulated one opens its gated models
        # to its own.
        env["HF_TOKEN"] = SIMULATED_HUB_TOKEN
        env["HF_ENDPOINT"] = self.hub.endpoint
        return env

    async def _probe(self) -> list[NodeFacts]:
        from dataclasses import replace

        from spark_tui.sim.nodes.remedies import UNREACHABLE_IN_DEMO

        # A real node's remedies (ping it, check its sshd) do not apply to a simulated one.
        facts = await super()._probe()
        return [
            replace(
                f,
                errors=[
                    e.partition(" (remedy: ")[0] + f" (remedy: {UNREACHABLE_IN_DEMO})"
                    for e in f.errors
                ],
            )
            if f.errors and f.memory_total_bytes is None
            else f
            for f in facts
        ]

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            if self.sim is not None:
                await self.sim.close()
                self.sim = None
            if self.hub is not None:
                self.hub.stop()
                self.hub = None
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

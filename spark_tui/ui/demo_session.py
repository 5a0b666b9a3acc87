"""The demo's session: the product's Session over simulated Sparks that it starts with the
demo and ends with it, reached over SSH exactly like real ones."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui.core.errors import SparkError
from spark_tui.service.session import Session
from spark_tui.service.ssh_nodes import SshNodes

if TYPE_CHECKING:
    from spark_tui.core.facts import NodeFacts
    from spark_tui.service.bench import BenchConfig
    from spark_tui.service.history import History


# Not a secret: the SIMULATED Hub's gated models open to it.
SIMULATED_HUB_TOKEN = "hf_simulated_demo_hub"


class SimulatedNodes(SshNodes):
    """Simulated Sparks started in this process (`start`), then reached over SSH like real
    ones; ended with `close`. A model sync downloads from a simulated Hub."""

    simulated = True

    def __init__(self, scenario: dict[str, Any], *, state_dir: Path | None = None) -> None:
        super().__init__([])
        self.scenario_args = scenario
        self.state_dir = state_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.sim: Any = None
        self.hub: Any = None

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
        sim = SimCluster(
            Scenario(**self.scenario_args),
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

    async def probe(self) -> list[NodeFacts]:
        from spark_tui.sim.nodes.remedies import UNREACHABLE_IN_DEMO

        # A real node's remedies (ping it, check its sshd) do not apply to a simulated one.
        facts = await super().probe()
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


def demo_history() -> History:
    """The demo's own history: simulated runs never meet the user's real ones. Opened when
    first used: its records load pydantic's models, which the first frame (and a demo
    nobody launches in) never needs."""
    from spark_tui.service.history import History

    return History.demo()


class DemoSession(Session):
    """The product's Session over SimulatedNodes (see module doc)."""

    def __init__(
        self,
        *,
        nodes: int = 2,
        memory_gb: int = 128,
        pace: float = 0.5,
        token_scale: float = 1.0,
        worker_dies_after: float | None = None,
        worker_dies_when: str | None = None,
        page_cache_gb: float = 0.0,
        state_dir: Path | None = None,
        bench_config: BenchConfig | None = None,
        base_address: str | None = None,
        nodes_type: type[SimulatedNodes] = SimulatedNodes,
        ring: bool = False,
    ) -> None:
        scenario: dict[str, Any] = dict(
            nodes=nodes,
            memory_gb=memory_gb,
            pace=pace,
            token_scale=token_scale,
            worker_dies_after=worker_dies_after,
            worker_dies_when=worker_dies_when,
            page_cache_gb=page_cache_gb,
            ssh_port=0,
            ring=ring,
        )
        if base_address:
            scenario["base_address"] = base_address
        self.simulation = nodes_type(scenario, state_dir=state_dir)
        super().__init__(
            nodes=self.simulation,
            bench_config=bench_config,
            open_history=demo_history,
            label=f"DEMO · {nodes} simulated {memory_gb} GB Sparks (no GPU)",
            reattach_hint="the simulated Sparks end with the demo",
        )

    # What the demo's tests and its crash net look at: the simulation's parts.
    @property
    def sim(self) -> Any:
        return self.simulation.sim

    @property
    def hub(self) -> Any:
        return self.simulation.hub

    @property
    def state_dir(self) -> Path | None:
        return self.simulation.state_dir

    @property
    def sync_cache(self) -> Path | None:
        return self.simulation.sync_cache

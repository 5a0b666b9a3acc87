"""The whole cockpit flow on the simulated Sparks (DemoSession, real SSH, simulated engine):
discover, pick, check, launch, ready, smoke, edit one setting, relaunch, compare, stop, quit.
"""

from __future__ import annotations

from cockpit_helpers import (
    cockpit,
    head_text,
    live_children,
    plain,
    results_text,
    static_text,
    wait_until,
    wait_until_gone,
)
from textual.message import Message

from spark_tui.core.workload import Workload
from spark_tui.ops.bench import BenchConfig
from spark_tui.sim.nodes import random_loopback_base
from spark_tui.ui import messages as msg
from spark_tui.ui.app import SparkApp
from spark_tui.ui.demo_session import DemoSession, SimulatedNodes
from spark_tui.ui.screens.dialogs import Dialog, HostKeyDialog
from spark_tui.ui.screens.edit import EditSettingDialog


async def test_whole_flow_on_simulated_sparks() -> None:
    before = live_children()
    # A short benchmark keeps the test quick; the product benchmarks with BenchConfig().
    quick = BenchConfig(concurrency=(1, 2), workload=Workload(prompt_tokens=32, output_tokens=16))
    backend = DemoSession(
        pace=0.05, token_scale=0.05, base_address=random_loopback_base(), bench_config=quick
    )
    app = SparkApp(backend, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)
    states = RankStates()
    async with cockpit(app, (120, 40), message_hook=states.record) as pilot:
        # discover: both simulated Sparks, probed over SSH
        await wait_until(pilot, app.discovered.is_set, 30, "discovery")
        assert len(app.nodes) == 2
        nodes = static_text(app, "#nodes")
        assert "sim-spark-1" in nodes and "sim-spark-2" in nodes and "GB10" in nodes
        # pick and check: move away and back, the fit panel follows the selection
        await pilot.press("down")
        await pilot.pause(0.05)
        assert app.selected.name != "glm-5.3-flash"
        await pilot.press("up")
        await pilot.pause(0.05)
        assert app.selected.name == "glm-5.3-flash"
        assert static_text(app, "#fit-body").lstrip().startswith("fits")
        # launch: each rank's pane loads with progress, then both ranks ready. Loading is
        # recorded as the panes are told, not polled: with the quick pace it can come and go
        # between two looks at a loaded machine's screen.
        await pilot.press("l")
        await wait_until(pilot, lambda: states.went_through("loading"), 30, "loading")
        await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 60, "ready")
        await wait_until(
            pilot, lambda: all(p.state == "ready" for p in app.panes.values()), 10, "both ready"
        )
        for rank in app.panes:
            assert states.of(rank)[-2:] == ["loading", "ready"], states.of(rank)
            assert states.loaded_with_progress(rank), states.of(rank)
        first_id = app.cluster.cluster_id
        assert "ready" in head_text(app, 0) and "ready" in head_text(app, 1)
        assert "ready" in results_text(app)
        # smoke
        await pilot.press("t")
        await wait_until(pilot, lambda: app.last_smoke is not None, 60, "smoke")
        assert all(r["ok"] for r in app.last_smoke), app.last_smoke
        assert "smoke checks passed" in results_text(app)
        # edit one setting: modal, validation, fit preview, relaunch, comparison
        await pilot.press("e")
        await pilot.pause(0.05)
        assert isinstance(app.screen, EditSettingDialog)
        await pilot.press(*"max_num_seqs", "enter", "8")
        await pilot.pause(0.05)
        assert "fit: fits" in plain(app.screen.query_one("#edit-preview").content)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.last_compare is not None, 120, "comparison")
        assert app.cluster is not None and app.cluster.ready
        assert app.cluster.overrides == {"max_num_seqs": "8"}
        compare = plain(app.last_compare)
        assert "max_num_seqs" in compare and "vs baseline" in compare and "tok/s" in compare
        assert app.cluster.cluster_id == first_id  # same recipe on the same nodes
        # every rank runs the new setting
        running = [
            " ".join(c.argv)
            for node in backend.sim.nodes
            for c in node.engine.containers.values()
            if c.running
        ]
        assert len(running) == 2
        for argv in running:
            assert "--max-num-seqs 8" in argv, argv
        # stop after a confirmation: nothing left on any node
        await pilot.press("s")
        await pilot.pause(0.05)
        assert isinstance(app.screen, Dialog)
        await pilot.press("y")
        await wait_until(pilot, lambda: app.cluster is None, 30, "stopped")
        assert await backend.running() is None
        assert "no container left" in results_text(app)
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "exit")
    assert backend.sim is None  # the simulated Sparks are closed with the cockpit
    await wait_until_gone(before)


class RankStates:
    """Each rank's states in the order the cockpit's panes were told them (a message hook:
    a state that lasts less than one look at the screen is still seen)."""

    def __init__(self) -> None:
        self.states: dict[int, list[str]] = {}
        self.progress: dict[int, list[float]] = {}
        # Each message reaches the rank's pane and the panes' container: counted once (held
        # here, so no other message can take its id).
        self._recorded: dict[int, msg.RankChanged] = {}

    def record(self, message: Message) -> None:
        if not isinstance(message, msg.RankChanged) or id(message) in self._recorded:
            return
        self._recorded[id(message)] = message
        event = message.event
        seen = self.states.setdefault(event.rank, [])
        if not seen or seen[-1] != event.state.value:  # one entry per state, not per message
            seen.append(event.state.value)
        if event.state.value == "loading" and event.progress is not None:
            self.progress.setdefault(event.rank, []).append(event.progress)

    def of(self, rank: int) -> list[str]:
        return self.states.get(rank, [])

    def went_through(self, state: str) -> bool:
        return any(state in seen for seen in self.states.values())

    def loaded_with_progress(self, rank: int) -> bool:
        """The rank's loading carried a progress that rose."""
        shown = self.progress.get(rank, [])
        return len(shown) > 1 and shown[-1] > shown[0]


class FreshKeys(SimulatedNodes):
    """The demo's Sparks, but with an empty known_hosts: every node's key must be confirmed."""

    async def start(self) -> None:
        from dataclasses import replace

        await super().start()
        assert self.state_dir is not None
        empty = self.state_dir / "empty_known_hosts"
        empty.write_text("")
        self.inventory = [replace(n, known_hosts=str(empty)) for n in self.inventory]


async def test_unknown_host_keys_are_confirmed_with_their_fingerprint() -> None:
    backend = DemoSession(
        pace=0.05, token_scale=0.05, base_address=random_loopback_base(), nodes_type=FreshKeys
    )
    app = SparkApp(backend, auto_refresh=False, handle_signals=False)
    async with cockpit(app, (120, 40)) as pilot:
        seen: list[str] = []
        while not app.discovered.is_set():
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, HostKeyDialog) or app.discovered.is_set(),
                30,
                "host key dialog",
            )
            if isinstance(app.screen, HostKeyDialog):
                await pilot.pause(0.05)
                dialog = app.screen
                assert dialog.fingerprint.startswith("SHA256:")
                assert dialog.fingerprint in plain(dialog.body)
                seen.append(dialog.host)
                await pilot.press("y")
                await pilot.pause(0.05)
        assert len(set(seen)) == 2 and len(app.nodes) == 2
        known = (backend.state_dir / "empty_known_hosts").read_text()
        assert known.count("ssh-ed25519") == 2
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, 30, "exit")

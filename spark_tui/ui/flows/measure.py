"""The smoke checks and the benchmark against the ready cluster, and what the status line
says of them (the results bar shows the figures)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from spark_tui.ui import messages as msg
from spark_tui.ui.flows.launch import watch_again
from spark_tui.ui.workers import app_work

if TYPE_CHECKING:
    from spark_tui.service.bench import BenchConfig
    from spark_tui.service.session import Cluster
    from spark_tui.ui.screens.main import MainScreen


def ready_cluster(screen: MainScreen) -> Cluster | None:
    """The cluster to measure: ready and not busy with something else (else a toast says
    why not)."""
    cluster = screen.cluster
    if cluster and cluster.ready and cluster.base_url:
        if screen.busy:
            screen.notify(f"busy: {screen.busy}", severity="warning")
            return None
        return cluster
    screen.notify(
        f"no ready cluster: launch one first ({screen.key_of('launch', 'l')})",
        severity="warning",
    )
    return None


def smoke(screen: MainScreen) -> None:
    if ready_cluster(screen):
        run_smoke(screen)


@app_work(group="measure")
async def run_smoke(screen: MainScreen) -> None:
    screen.show_status("running the smoke checks: health, models, chat, tool call, streaming…")
    await screen.consume(screen.session.smoke())


def smoke_updated(screen: MainScreen, message: msg.SmokeUpdate) -> None:
    if message.done is None:
        return
    screen.last_smoke = message.results
    failed = [r["name"] for r in message.results if not r.get("ok")]
    if failed:
        screen.show_status(Text(f"smoke checks failed: {', '.join(failed)}", style="bold red"))
    else:
        n = len(message.results)
        screen.show_status(Text(f"smoke checks passed ({n}/{n})", style="bold green"))


def bench(screen: MainScreen) -> None:
    """The bench dialog with this session's settings; Enter runs the benchmark."""
    if not ready_cluster(screen):
        return
    from spark_tui.service.bench import BenchSettings
    from spark_tui.ui.screens.bench import BenchDialog

    def chosen(config: BenchConfig | None) -> None:
        if config is not None:
            screen.session.bench_config = config
            run_bench(screen)

    screen.app.push_screen(BenchDialog(BenchSettings.of(screen.session.bench_config)), chosen)


@app_work(group="measure")
async def run_bench(screen: MainScreen) -> None:
    config = screen.session.bench_config
    screen.busy = "benchmark"
    # Like the node refresh, the watch waits: its requests would disturb the figures,
    # and a saturated engine's slow answer is no hang.
    screen.workers.cancel_group(screen.app, "watch")
    screen.send(msg.WatchEnded("paused while the benchmark runs"), screen.gauges, screen=False)
    screen.show_status(f"benchmark: concurrency {', '.join(map(str, config.concurrency))}…")
    try:
        await screen.consume(screen.session.bench())
    finally:
        screen.busy = None
        watch_again(screen)


def bench_updated(screen: MainScreen, message: msg.BenchUpdate) -> None:
    if message.progress:
        screen.show_status(message.progress)
    if message.done is None:
        return
    screen.last_bench = message.done
    screen.last_compared = None
    n = len(message.levels or [])
    again, full = screen.key_of("bench", "b"), screen.key_of("results", "v")
    screen.show_status(
        Text(
            f"benchmark done: {n} levels below ({full} every figure, {again} again)",
            style="bold",
        )
    )

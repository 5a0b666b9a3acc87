"""The service's events in the cockpit: each event as a message to the widgets that render
it (and to the main screen, which keeps the status line), log lines into their pane's
buffer, the service's questions as dialogs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from rich.text import Text

from spark_tui.service import events as ev
from spark_tui.service.logs import is_own_request
from spark_tui.ui import messages as msg

if TYPE_CHECKING:
    from spark_tui.ui.screens.dialogs import Dialog
    from spark_tui.ui.screens.main import MainScreen
    from spark_tui.ui.widgets.logpane import LogPane
    from spark_tui.ui.widgets.raystate import RayStatePanel


async def consume(screen: MainScreen, events: AsyncIterator[ev.ServiceEvent]) -> None:
    """Route a service action's events to the widgets; answer its questions in dialogs.
    Log lines go straight into their pane's buffer (written in batches on a timer)."""
    smoke: list[dict[str, Any]] = []
    async for event in events:
        if screen.syncer.take(event):
            continue
        match event:
            case ev.LogLine(rank=rank):
                pane = screen.panes.get(rank)
                if pane is not None:
                    pane.push(event.text, event.kind, own=is_own_request(event))
            case ev.Question():
                event.reply(await ask(screen, event))
            case ev.SmokeChecked(result=result):
                smoke.append(result.to_dict())
                screen.send(msg.SmokeUpdate(list(smoke), None), screen.bar)
            case ev.SmokeDone(results=results):
                smoke = [r.to_dict() for r in results]
                screen.send(msg.SmokeUpdate(smoke, event), screen.bar)
                smoke = []
            case ev.Recorded(error=error):
                if error:
                    screen.warn(error)
            case _:
                route(screen, event)


def route(screen: MainScreen, event: ev.ServiceEvent) -> None:
    """One event as a message to each widget that renders it, and to the screen."""
    bar, gauges, nodes = screen.bar, screen.gauges, screen.nodes_panel
    match event:
        case ev.Probed():
            # Free memory is read by the probe and by the watch: the nodes panel and
            # the gauges show the latest reading, whichever took it.
            screen.send(msg.NodesProbed(event), nodes, gauges)
        case ev.RankStateChanged(rank=rank):
            screen.send(msg.RankChanged(event), *panes_of(screen, [rank]), screen.rank_panes)
        case ev.ClusterReady():
            screen.send(msg.ClusterUp(event))
        case ev.Endpoint():
            screen.send(msg.EndpointKnown(event), bar)
        case ev.Notice():
            screen.send(msg.ServiceNotice(event))
        case ev.NodeUnreachable(ranks=ranks):
            # The link is down, the ranks are not failed for it: a state, retried.
            screen.send(msg.NodeOutage(event), nodes, *panes_of(screen, ranks))
        case ev.NodeReachable(ranks=ranks):
            screen.send(msg.NodeBack(event), nodes, *panes_of(screen, ranks))
        case ev.BenchProgressed(progress=p):
            progress = (
                f"benchmark: concurrency {p.concurrency} ({p.level_index + 1}/{p.levels}), "
                f"{p.done}/{p.total} requests, {p.errors} errors, {p.elapsed_s:.0f} s"
            )
            screen.send(msg.BenchUpdate(progress=progress))
        case ev.BenchDone(result=result):
            levels = [lv.to_dict() for lv in result.levels]
            screen.send(msg.BenchUpdate(levels=levels, done=event), bar, screen.link_panel)
        case ev.LinkSample():
            screen.send(msg.LinkSampled(event), screen.link_panel, screen=False)
        case ev.Compared():
            screen.send(msg.TuneCompared(event), bar)
        case ev.TuneReplaced() | ev.TuneRestored():
            from spark_tui.ui.flows.tune import tune_event

            tune_event(screen, event)
        case ev.SweepProgressed() | ev.SweepValueDone() | ev.SweepDone():
            from spark_tui.ui.flows.sweep import sweep_event

            sweep_event(screen, event)
        case ev.Stopped():
            panes = [screen.rank_panes, *screen.panes.values()]
            screen.send(
                msg.ClusterStopped(event), bar, gauges, screen.link_panel, *panes, screen=False
            )
        case ev.WatchAlert(rank=rank):
            from spark_tui.ui.flows.launch import alert_remedy

            alert = msg.RankAlert(event, alert_remedy(screen))
            screen.send(alert, gauges, *panes_of(screen, [rank]))
        case (
            ev.WatchStarted()
            | ev.ProbeResult()
            | ev.ServiceGauges()
            | ev.NodeMemory()
            | ev.ContainerStates()
            | ev.NodeNotAnswering()
        ):
            screen.send(msg.WatchSampled(event), gauges, nodes, screen=False)
        case ev.RayClusterState():
            from spark_tui.ui.widgets.raystate import RayStateChanged

            screen.send(RayStateChanged(event), ray_panel(screen), screen=False)
        case _:
            pass  # the rest is consume's, or the sync view's (see CockpitSync.take)


def panes_of(screen: MainScreen, ranks: Any) -> list[LogPane]:
    """The log panes shown of these ranks."""
    return [screen.panes[r] for r in ranks if r in screen.panes]


async def ask(screen: MainScreen, question: ev.Question) -> bool:
    """A question of the service, as a dialog; the answer once the user gives it."""
    from spark_tui.ui.screens.dialogs import Dialog, HostKeyDialog

    answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def done(ok: bool | None) -> None:
        if not answer.done():
            answer.set_result(bool(ok))

    if question.kind == ev.HOST_KEY:
        dialog: Dialog = HostKeyDialog(question.data["host"], question.data["fingerprint"])
    else:
        dialog = Dialog(
            question.title, Text(question.text), yes=question.yes_label, default=question.default
        )
    screen.app.push_screen(dialog, done)
    return await answer


def ray_panel(screen: MainScreen) -> RayStatePanel:
    """The Ray cluster's line above the logs, made when a Ray launch first reports."""
    from spark_tui.ui.widgets.raystate import RayStatePanel

    found = screen.query(RayStatePanel)
    if found:
        return found.first(RayStatePanel)
    panel = RayStatePanel(id="raystate")
    screen.mount(panel, before=screen.query_one("#logs"))
    return panel

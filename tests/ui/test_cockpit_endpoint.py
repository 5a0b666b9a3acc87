"""The API's URL and the tunnel command: one line each at 160 and at 80 columns (a wrapped
command breaks a mouse copy), and a key that copies the whole command (OSC 52)."""

from __future__ import annotations

from cockpit_helpers import settle, wait_until
from cockpit_replay import ReplaySession
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Static

from spark_tui.core.inventory import InventoryNode
from spark_tui.ui.app import SparkApp
from spark_tui.ui.screens.info import HelpScreen

# A real inventory's key and known_hosts paths make the command longer than 160 columns.
HOME = "/home/someone-with-a-long-name/.ssh"


def long_tunnel_app() -> SparkApp:
    session = ReplaySession()
    session.nodes.inventory = [
        InventoryNode(
            n.name,
            n.host,
            port=n.port,
            user=n.user,
            identity_file=f"{HOME}/id_ed25519_spark_cluster_{n.name}",
            known_hosts=f"{HOME}/known_hosts.d/spark-cluster-known-hosts",
        )
        for n in session.inventory
    ]
    return SparkApp(session, recipe="glm-5.3-flash", auto_refresh=False, handle_signals=False)


async def ready(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await wait_until(pilot, app.discovered.is_set, 10, "discovery")
    await pilot.press("l")
    await wait_until(pilot, lambda: app.cluster and app.cluster.ready, 10, "ready")
    await settle(pilot)


def shown_rows(app: SparkApp) -> list[str]:
    """The results bar's rows as the terminal shows them."""
    body = app.screen.query_one("#results-body", Static)
    width, height = body.size
    return [strip.text for strip in body.render_lines(Region(0, 0, width, height))]


async def check_one_line_each(size: tuple[int, int]) -> None:
    app = long_tunnel_app()
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        tunnel = app.main.bar.endpoint.tunnel
        assert len(tunnel) > 160, tunnel  # the case that wrapped
        rows = shown_rows(app)
        api = [r for r in rows if r.startswith("API ")]
        assert len(api) == 1 and "http://127.0.0.11:8000/v1" in api[0], rows
        parts = [r for r in rows if "ssh -N -L" in r or "known_hosts" in r or "nvidia@" in r]
        assert len(parts) == 1 and parts[0].startswith("tunnel ssh -N -L 8000:"), rows
        # ... and the whole command goes to the clipboard with one key
        await pilot.press("y")
        await pilot.pause(0.1)
        assert app.clipboard == tunnel


async def test_at_160_columns_the_tunnel_is_one_line_and_y_copies_it() -> None:
    await check_one_line_each((160, 48))


async def test_at_80x24_the_api_url_and_the_tunnel_are_shown() -> None:
    await check_one_line_each((80, 24))


async def test_the_copy_key_is_in_the_help_and_says_when_there_is_nothing() -> None:
    app = long_tunnel_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, app.discovered.is_set, 10, "discovery")
        await pilot.press("y")
        await pilot.pause(0.1)
        assert app.clipboard == ""
        said = [str(n.message) for n in app._notifications]
        assert any("no tunnel to copy" in m and "launch one first (l)" in m for m in said), said
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        assert ("y", "copy the API's tunnel command") in app.screen.rows

"""Ending the cockpit: asked (stop our cluster, or leave it running), or at once when the
terminal went away; and the crash log an unexpected error leaves. Loaded on use: the first
frame needs none of it."""

from __future__ import annotations

import contextlib
import os
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from spark_tui.ui.paths import user_config_dir
from spark_tui.ui.screens.dialogs import Dialog, QuitDialog

if TYPE_CHECKING:
    from spark_tui.ui.app import SparkApp


def ask_to_quit(app: SparkApp) -> None:
    """Quit: at once when no cluster of ours runs; else ask whether to stop it (the demo's
    always stops) or leave it running."""
    cluster = app.cluster
    if cluster is None or not cluster.running:
        app.exit_clean()
        return
    if app.session.simulated:
        body = Text(f"Cluster {cluster.cluster_id} runs on the simulated Sparks of this demo;\n")
        body.append("quitting stops it (the simulated nodes end with the demo).")

        def stop_sim(yes: bool | None) -> None:
            if yes:
                app.stop_and_exit()

        app.push_screen(Dialog("Quit the demo", body, yes="Stop and quit"), stop_sim)
        return

    def choose(choice: str | None) -> None:
        if choice == "stop":
            app.stop_and_exit()
        elif choice == "leave":
            app.exit_clean(leave=cluster)

    app.push_screen(QuitDialog(cluster.cluster_id, app.session.reattach_hint), choose)


def write_crash_log(exc: BaseException | None) -> str:
    """Append `exc`'s traceback to the crash log; where it is (or why there is none)."""
    path = Path(os.environ.get("SPARK_TUI_CRASH_LOG") or user_config_dir() / "crash.log")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            if exc is not None:
                fh.writelines(traceback.format_exception(exc))
            fh.write("\n")
    except OSError:
        return "(no crash log could be written)"
    return str(path)


def detach_from_terminal() -> None:
    """Point stdout and stderr at /dev/null: writes to a hung-up terminal fail or block,
    and there is nobody left to read them."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)

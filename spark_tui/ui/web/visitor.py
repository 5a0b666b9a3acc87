"""One browser visitor's demo cockpit (run by the web server through textual-serve, one
process per websocket). It sees none of the user's files: its own home, config, data and
cache folders, and no SSH agent or Hub token; it ends when the server does."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Sequence

from spark_tui.ui.web.options import DemoOptions

# What a visitor's process keeps of the server's environment: how to run Python and
# textual-serve's driver settings; never a credential or the user's folders.
KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR", "TZ")
KEPT_PREFIXES = ("TEXTUAL", "TERM", "COLUMNS", "ROWS")


def isolate(home: str) -> None:
    """Replace the environment by a minimal one whose folders are all under `home`."""
    kept = {k: v for k, v in os.environ.items() if k in KEPT or k.startswith(KEPT_PREFIXES)}
    os.environ.clear()
    os.environ.update(kept)
    os.environ["HOME"] = home
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        os.environ[name] = os.path.join(home, name.lower())


def die_with_parent() -> None:
    """SIGTERM (an orderly quit under textual's web driver) when the server dies, however
    it dies (Linux; elsewhere the closed stdin pipe ends the visitor at its next read)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() == 1:  # the server was gone before the line above
        raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one visitor's demo cockpit with the options the server passed (one JSON argument)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m spark_tui.ui.web.visitor OPTIONS_JSON", file=sys.stderr)
        return 2
    options = DemoOptions.from_json(args[0])
    die_with_parent()
    with tempfile.TemporaryDirectory(prefix="spark-tui-web-visitor-") as home:
        isolate(home)
        from textual.drivers.web_driver import WebDriver

        from spark_tui.ui.demo_app import demo_app
        from spark_tui.ui.runner import run_cockpit

        app = demo_app(
            nodes=options.nodes,
            memory_gb=options.memory_gb,
            recipe=options.recipe,
            theme=options.theme,
            pace=options.pace,
            token_scale=options.token_scale,
            ring=options.ring,
            driver_class=WebDriver,
        )
        return run_cockpit(app)


if __name__ == "__main__":
    sys.exit(main())

"""One browser visitor's demo cockpit (run by the web server through textual-serve, one
process per websocket). It sees none of the user's files: its own home, config, data and
cache folders, and no SSH agent or Hub token; it ends when the server does."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from collections.abc import Sequence

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
    parser = argparse.ArgumentParser(prog="spark_tui.ui.web.visitor")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--memory-gb", type=int, default=128)
    parser.add_argument("--recipe")
    parser.add_argument("--theme")
    parser.add_argument("--pace", type=float, default=0.5)
    parser.add_argument("--token-scale", type=float, default=1.0)
    args = parser.parse_args(argv)
    die_with_parent()
    with tempfile.TemporaryDirectory(prefix="spark-tui-web-visitor-") as home:
        isolate(home)
        from textual.drivers.web_driver import WebDriver

        from spark_tui.ui.demo_app import demo_app
        from spark_tui.ui.runner import run_cockpit

        app = demo_app(
            nodes=args.nodes,
            memory_gb=args.memory_gb,
            recipe=args.recipe,
            theme=args.theme,
            pace=args.pace,
            token_scale=args.token_scale,
            driver_class=WebDriver,
        )
        return run_cockpit(app)


if __name__ == "__main__":
    sys.exit(main())

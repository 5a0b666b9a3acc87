"""Helpers for the simulated engine's tests: start `python -S -m spark_tui.sim.engine` (no
site-packages, so a non-stdlib import would fail) on 127.0.0.1 with fast pacing, read its
output, wait for /health, and always stop it."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "recipes"

FAST_ENV = {
    "SPARK_SIM_PACE": "0.02",
    "SPARK_SIM_TOKEN_SCALE": "0.01",
    "SPARK_SIM_HEARTBEAT_TIMEOUT_S": "3",
}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recipe_argv(name: str, **settings: object) -> tuple[list[str], dict[str, str]]:
    """The serve argv (without `vllm`) and env of a bundled recipe, rendered by the foundation."""
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.core.render import render_argv, render_env

    recipe = find_recipe(name)
    merged = dict(recipe.defaults)
    merged.update(settings)
    argv = render_argv(recipe, merged)
    assert argv[:2] == ["vllm", "serve"], argv
    return argv[1:], render_env(recipe)


class Engine:
    """One simulated engine process."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        full_env = dict(os.environ)
        full_env.update(FAST_ENV)
        full_env["PYTHONPATH"] = str(REPO)
        full_env.pop("HF_TOKEN", None)
        full_env.update(env or {})
        self.argv = argv
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-m", "spark_tui.sim.engine", *argv],
            env=full_env,
            cwd=str(REPO),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        """Everything printed so far (stdout and stderr)."""
        return "\n".join(self.lines)

    def wait_healthy(self, port: int, host: str = "127.0.0.1", timeout: float = 20.0) -> None:
        """Poll /health until 200; fail with the log if the process exits or time runs out."""
        end = time.monotonic() + timeout
        url = f"http://{host}:{port}/health"
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"engine exited {self.proc.returncode}:\n{self.output}")
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise AssertionError(f"engine not healthy after {timeout}s:\n{self.output}")

    def wait_exit(self, timeout: float = 20.0) -> int:
        """The exit code; fails with the log on timeout."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"engine still running after {timeout}s:\n{self.output}") from exc
        self._reader.join(timeout=2)
        return rc

    def wait_for_line(self, needle: str, timeout: float = 20.0) -> str:
        """The first output line containing `needle`."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in list(self.lines):
                if needle in line:
                    return line
            if self.proc.poll() is not None and self._reader.is_alive() is False:
                break
            time.sleep(0.02)
        raise AssertionError(f"no line with {needle!r}:\n{self.output}")

    def stop(self) -> None:
        """Terminate (then kill) the process; idempotent."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self._reader.join(timeout=2)
            self.proc.stdout.close()


def serve_argv(model: str, port: int, *flags: str) -> list[str]:
    """`serve MODEL --host 127.0.0.1 --port PORT FLAGS...`."""
    return ["serve", model, "--host", "127.0.0.1", "--port", str(port), *flags]


def quote(argv: list[str]) -> str:
    """argv as a shell line (for messages)."""
    return " ".join(shlex.quote(a) for a in argv)

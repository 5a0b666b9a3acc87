"""A simulated rank runs in a session of its own (so a stop reaches its whole group): when the
simulated node's process dies without closing its nodes, the rank must not live on as an
orphan that holds the node's address and ports."""

from __future__ import annotations

import subprocess

from engine_harness import Engine, free_port, serve_argv


def test_a_rank_stops_once_its_simulated_node_process_is_gone() -> None:
    owner = subprocess.Popen(["sleep", "600"])
    port = free_port()
    engine = Engine(
        serve_argv("Qwen/Qwen3-0.6B", port), env={"SPARK_SIM_OWNER_PID": str(owner.pid)}
    )
    try:
        engine.wait_healthy(port)
        owner.kill()
        owner.wait()
        # It ends as `docker stop` ends it (SIGTERM: a clean stop), within its 1 s watch.
        assert engine.wait_exit(timeout=30) == 0, engine.output
    finally:
        owner.kill()
        engine.stop()


def test_a_rank_whose_owner_lives_keeps_serving() -> None:
    owner = subprocess.Popen(["sleep", "600"])
    port = free_port()
    engine = Engine(
        serve_argv("Qwen/Qwen3-0.6B", port), env={"SPARK_SIM_OWNER_PID": str(owner.pid)}
    )
    try:
        engine.wait_healthy(port)
        assert engine.proc.poll() is None
        subprocess.run(["sleep", "2.5"], check=True)  # more than two of the rank's checks
        assert engine.proc.poll() is None, engine.output
    finally:
        owner.kill()
        owner.wait()
        engine.stop()

"""What a user can do about a simulated node that does not answer: there is no machine to
ping, power on or log in to, so the remedies of real nodes do not apply."""

from __future__ import annotations

UNREACHABLE_IN_DEMO = (
    "this simulated Spark is an SSH server inside this demo's own process (no machine to "
    "ping or power on): quit and run `spark-tui demo` again; to run the simulated Sparks "
    "in a process of their own, `spark-tui sim --nodes 2 --inventory sim.yaml` in one "
    "terminal and `spark-tui --inventory sim.yaml` in another"
)

"""The `spark-tui stop ...` remedy is built once (Targets.command) and works where the
command that names it did: quoted for the shell, with host-key trust when it was given."""

from __future__ import annotations

from spark_tui.service.targets import Targets


def test_the_stop_remedy_is_quoted_for_the_shell() -> None:
    inventory = Targets(inventory="/tmp/my lab.yaml")
    assert inventory.command("stop", live=True) == "spark-tui stop --inventory '/tmp/my lab.yaml'"


def test_the_stop_remedy_keeps_host_key_trust() -> None:
    t = Targets(hosts="a,b", accept_new_host_keys=True)
    assert t.command("stop", live=True) == "spark-tui stop --hosts a,b --accept-new-host-keys"

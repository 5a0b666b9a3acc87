"""Remedies of connection failures read as whole sentences."""

from __future__ import annotations

from spark_tui.core.inventory import InventoryNode
from spark_tui.remote.ssh import NodeConnection


def test_timeout_remedy_of_an_unreachable_node_is_a_whole_sentence() -> None:
    conn = NodeConnection(InventoryNode(name="spark-a", host="10.0.0.1"), ssh_config=())
    err = conn._unreachable(TimeoutError())
    assert not err.remedy.endswith(("the address", "and", "and the address"))
    assert "ping" in err.remedy and "inventory" in err.remedy

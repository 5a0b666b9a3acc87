"""`probe`'s wiring lines within an 80-column terminal: a link's ends, speed and whether its
peers answered, wrapped between them (a link of four Sparks was over 150 columns wide)."""

from __future__ import annotations

from spark_tui.commands.probe import summary
from spark_tui.core.facts import Interface, NodeFacts


def _node(i: int) -> NodeFacts:
    port = Interface(
        "enp1s0f1np1", "rocep1s0f1", "up", f"192.168.100.1{i}", 200_000, 24, ["192.168.100.10"]
    )
    return NodeFacts(name=f"spark-node-{i}", address=f"10.0.0.1{i}", interfaces=[port])


def test_a_link_of_four_sparks_wraps_between_its_ends() -> None:
    lines = summary([_node(i) for i in range(4)]).splitlines()
    wiring = lines[next(i for i, line in enumerate(lines) if line.startswith("wiring")) :]
    assert all(len(line) <= 80 for line in wiring), "\n".join(wiring)
    said = " ".join(wiring)
    for i in range(4):
        assert f"spark-node-{i} enp1s0f1np1 192.168.100.1{i}" in said, wiring
    assert wiring[1].startswith("  link    192.168.100.0/24  spark-node-0 ")
    assert all(line.startswith(" " * 10) for line in wiring[2:]), wiring

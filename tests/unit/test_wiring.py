"""Telling the cabling of Sparks apart from their probes (real ibdev2netdev lines, `ip -j`
output in iproute2's format)."""

from __future__ import annotations

import json
from pathlib import Path

from spark_tui.core import wiring as w
from spark_tui.core.facts import NodeFacts
from spark_tui.remote import parsers as p
from spark_tui.remote.probe import facts_from_outputs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# A GB10's four ConnectX netdevs, as ibdev2netdev lists them (reference outputs).
PORTS = [
    ("rocep1s0f0", "enp1s0f0np0"),
    ("rocep1s0f1", "enp1s0f1np1"),
    ("roceP2p1s0f0", "enP2p1s0f0np0"),
    ("roceP2p1s0f1", "enP2p1s0f1np1"),
]


def _node(name: str, addrs: dict[str, str], neigh: dict[str, list[str]] | None = None) -> NodeFacts:
    """A node probed as a GB10 answers: `addrs` maps a netdev that is up to its CIDR."""
    ibdev = "".join(
        f"{rdma} port 1 ==> {dev} ({'Up' if dev in addrs else 'Down'})\n" for rdma, dev in PORTS
    )
    ip_addr = [
        {
            "ifname": dev,
            "operstate": "UP" if dev in addrs else "DOWN",
            "addr_info": (
                [
                    {
                        "family": "inet",
                        "local": addrs[dev].split("/")[0],
                        "prefixlen": int(addrs[dev].split("/")[1]),
                    }
                ]
                if dev in addrs
                else []
            ),
        }
        for _, dev in PORTS
    ]
    ip_neigh = [
        {"dst": dst, "dev": dev, "lladdr": "4c:bb:47:2e:2c:35", "state": ["REACHABLE"]}
        for dev, dsts in (neigh or {}).items()
        for dst in dsts
    ]
    speeds = "".join(f"{dev} {200000 if dev in addrs else -1}\n" for _, dev in PORTS)
    return facts_from_outputs(
        name,
        f"10.1.0.{len(name)}",
        {
            "ibdev2netdev": ibdev,
            # `ip -j -batch`: the addresses' array, then the neighbours', a line each.
            "ip": json.dumps(ip_addr) + "\n" + json.dumps(ip_neigh) + "\n",
            "net_speeds": speeds,
        },
    )


def ring3() -> list[NodeFacts]:
    """Three Sparks, port f0 toward the next, f1 toward the previous: a subnet per cable."""
    return [
        _node("a", {"enp1s0f0np0": "192.168.101.1/24", "enp1s0f1np1": "192.168.103.1/24"}),
        _node("b", {"enp1s0f0np0": "192.168.102.2/24", "enp1s0f1np1": "192.168.101.2/24"}),
        _node("c", {"enp1s0f0np0": "192.168.103.3/24", "enp1s0f1np1": "192.168.102.3/24"}),
    ]


def ring4() -> list[NodeFacts]:
    return [
        _node("a", {"enp1s0f0np0": "10.0.1.1/30", "enp1s0f1np1": "10.0.4.2/30"}),
        _node("b", {"enp1s0f0np0": "10.0.2.1/30", "enp1s0f1np1": "10.0.1.2/30"}),
        _node("c", {"enp1s0f0np0": "10.0.3.1/30", "enp1s0f1np1": "10.0.2.2/30"}),
        _node("d", {"enp1s0f0np0": "10.0.4.1/30", "enp1s0f1np1": "10.0.3.2/30"}),
    ]


def test_neighbours_parsed_per_port_silent_ones_left_out() -> None:
    text = (FIXTURES / "constructed_ip_j_neigh_gb10_port1_up.json").read_text()
    assert p.parse_ip_neigh(text) == {
        "enP7s7": ["192.168.1.1"],
        "enp1s0f1np1": ["169.254.37.113"],
        "docker0": ["172.17.0.2"],
    }
    plain = "192.168.101.2 dev enp1s0f0np0 lladdr 4c:bb:47:2e:2c:35 REACHABLE\n"
    plain += "192.168.101.9 dev enp1s0f0np0 FAILED\n"
    assert p.parse_ip_neigh(plain) == {"enp1s0f0np0": ["192.168.101.2"]}


def test_probe_keeps_prefix_and_peers_of_each_port() -> None:
    node = _node("a", {"enp1s0f1np1": "192.168.100.10/24"}, {"enp1s0f1np1": ["192.168.100.11"]})
    (up,) = node.connectx_up
    assert (up.netdev, up.ipv4, up.prefix_len, up.peers) == (
        "enp1s0f1np1",
        "192.168.100.10",
        24,
        ["192.168.100.11"],
    )


def test_direct_pair() -> None:
    nodes = [
        _node("a", {"enp1s0f0np0": "192.168.100.10/24"}, {"enp1s0f0np0": ["192.168.100.11"]}),
        _node("b", {"enp1s0f1np1": "192.168.100.11/24"}),
    ]
    wiring = w.wiring_of(nodes)
    assert wiring.kind == w.PAIR
    (link,) = wiring.links
    assert link.answered and link.speed_mbps == 200000
    assert [(p.node, p.netdevs) for p in link.ports] == [
        ("a", ("enp1s0f0np0",)),
        ("b", ("enp1s0f1np1",)),
    ]
    assert wiring.summary == "direct pair, 200 Gb/s"


def test_switch_puts_every_node_on_one_subnet() -> None:
    nodes = [_node(n, {"enp1s0f0np0": f"10.10.0.{i}/24"}) for i, n in enumerate("abcd", 1)]
    wiring = w.wiring_of(nodes)
    assert wiring.kind == w.SWITCH
    assert wiring.linked("a", "d") and not wiring.missing


def test_ring_of_three_links_every_pair_on_its_own_subnet() -> None:
    wiring = w.wiring_of(ring3())
    assert wiring.kind == w.RING
    assert sorted(link.subnet for link in wiring.links) == [
        "192.168.101.0/24",
        "192.168.102.0/24",
        "192.168.103.0/24",
    ]
    assert [p.netdevs for p in wiring.ports_of("a")] == [("enp1s0f0np0",), ("enp1s0f1np1",)]
    assert [p.netdevs for p in wiring.ports_of("a", ["c"])] == [("enp1s0f1np1",)]
    assert wiring.link_between("a", "b") is not None
    link = wiring.link_between("a", "b")
    assert link is not None and link.port_of("b") is not None
    assert link.port_of("b").address == "192.168.101.2"  # type: ignore[union-attr]


def test_ring_of_four_has_no_link_across() -> None:
    wiring = w.wiring_of(ring4())
    assert wiring.kind == w.RING
    assert wiring.missing == (("a", "c"), ("b", "d"))
    assert not wiring.linked("a", "c") and wiring.linked("a", "d")
    assert wiring.summary.startswith("ring of 4")
    assert wiring.short == "ring of 4, 200G"


def test_ring_with_a_cable_missing_is_a_chain() -> None:
    nodes = ring4()
    nodes[3] = _node("d", {"enp1s0f1np1": "10.0.3.2/30"})
    wiring = w.wiring_of(nodes)
    assert wiring.kind == w.CHAIN
    assert ("a", "d") in wiring.missing
    assert any("a" in line and "no other node" in line for line in wiring.describe())


def test_a_node_with_no_link_makes_it_incomplete() -> None:
    nodes = ring3()[:2] + [_node("c", {})]
    nodes[0] = _node("a", {"enp1s0f0np0": "192.168.101.1/24"})
    wiring = w.wiring_of(nodes)
    assert wiring.kind == w.INCOMPLETE
    assert wiring.missing == (("a", "c"), ("b", "c"))
    assert "no link a-c, b-c" in wiring.summary
    assert wiring.short == "incomplete: no link a-c +1"


def test_link_local_ring_is_told_from_the_neighbours_that_answered() -> None:
    # A bare cable gets a 169.254/16 address: one subnet for all, so only the peers seen
    # on each port tell a ring from a switch.
    nodes = [
        _node(
            "a",
            {"enp1s0f0np0": "169.254.1.1/16", "enp1s0f1np1": "169.254.3.1/16"},
            {"enp1s0f0np0": ["169.254.1.2"], "enp1s0f1np1": ["169.254.3.3"]},
        ),
        _node(
            "b",
            {"enp1s0f0np0": "169.254.2.2/16", "enp1s0f1np1": "169.254.1.2/16"},
            {"enp1s0f0np0": ["169.254.2.3"]},
        ),
        _node("c", {"enp1s0f0np0": "169.254.3.3/16", "enp1s0f1np1": "169.254.2.3/16"}),
    ]
    wiring = w.wiring_of(nodes)
    assert wiring.kind == w.RING
    assert all(len(link.ports) == 2 and link.answered for link in wiring.links)


def test_single_and_unknown() -> None:
    assert w.wiring_of(ring3()[:1]).kind == w.SINGLE
    assert w.wiring_of([NodeFacts("a", "h1"), NodeFacts("b", "h2")]).kind == w.UNKNOWN


def test_probe_names_who_is_linked_to_whom_at_what_speed() -> None:
    from spark_tui.commands.probe import summary

    text = summary(ring3())
    assert "wiring  ring of 3: a link and a subnet per pair of neighbours, 200 Gb/s" in text
    # Wrapped between its parts within 80 columns.
    assert (
        "  link    192.168.101.0/24  a enp1s0f0np0 192.168.101.1\n"
        "          b enp1s0f1np1 192.168.101.2  200 Gb/s  no reply seen yet"
    ) in text


def test_link_local_pair_with_no_neighbour_seen_yet_is_still_a_pair() -> None:
    nodes = [
        _node("a", {"enp1s0f1np1": "169.254.127.30/16"}),
        _node("b", {"enp1s0f0np0": "169.254.37.113/16"}),
    ]
    wiring = w.wiring_of(nodes)
    assert wiring.kind == w.PAIR
    assert not wiring.links[0].answered
